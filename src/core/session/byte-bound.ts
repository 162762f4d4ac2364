/**
 * max-in-flight-bytes, in two parts:
 * - the window: a source that can cap its unacked deliveries (AMQP: basic.qos on the channel) is asked for no more
 *   than fit in the bound at the size of the bodies seen: max / size estimate, at most prefetch. The broker then sends
 *   no more than that, so nothing is on the wire beyond it. Before the first delivery the estimate is 1 MiB (the
 *   default bound lets 16 messages through, not 500 of unknown size), replaced by the first body seen; from then on the
 *   estimate is the largest recent body, rising at once and decaying by 1/32 of the difference per smaller body, so a
 *   stream of mixed sizes is sized by its large ones. A window is asked for again only when it shrinks or grows by a
 *   quarter, so a steady stream asks once (and a window reopening from 8 to 500 after one large body, ~20 times).
 * - the stop: once the bodies received and not settled exceed the bound anyway (a body larger than the estimate), the
 *   session stops taking deliveries (the source stops consuming) until they fall below RESUME_FRACTION of it (hysteresis: a bound that flipped at every message would cost a cancel and a consume each).
 *
 * Counted in the session's intake (../session.ts accept()) and in settle() (./settle.ts), the one place a job is done:
 * an add and a subtraction per message, no allocation. Nothing is ever refused: a delivery that comes while the
 * bound holds (it was on the wire before the consumer stopped) is taken like any other, so a single message larger
 * than the bound passes (it closes the bound, and opens it again once it is settled). What the source does about it
 * (which sources can stop and start again on their connection) is the session's business: see ../session.ts.
 */

/** Consuming resumes once the bytes in flight are below this fraction of max-in-flight-bytes. */
export const RESUME_FRACTION = 0.75;
/** The body size the first window assumes, before any delivery was seen. */
export const FIRST_SIZE_ESTIMATE = 1024 * 1024;

/** The delivery window for bodies of `size` bytes: as many as fit in `maxBytes`, at least 1, at most `prefetch`. */
export function deliveryWindow(maxBytes: number, prefetch: number, size = FIRST_SIZE_ESTIMATE): number {
  return Math.max(1, Math.min(prefetch, Math.floor(maxBytes / Math.max(1, size))));
}

export class ByteBound {
  /** Bytes of the bodies received and not settled yet. */
  bytes = 0;
  /** The bound was exceeded, and the bytes have not fallen below `resumeBelow` since: take no more deliveries. */
  over = false;
  /** Below this many bytes in flight the bound lets go again (at least 1: with nothing in flight it always does). */
  readonly resumeBelow: number;
  /** The delivery window last asked for (messages); the source was opened with deliveryWindow(max, prefetch). */
  window: number;
  private sizeEstimate = FIRST_SIZE_ESTIMATE;
  private sized = false;

  constructor(
    readonly max: number,
    private readonly prefetch: number,
    /** Called when `over` changes; must not throw. */
    private readonly changed: (over: boolean) => void,
    /** Called with a new delivery window; undefined for a source that has none. Must not throw. */
    private readonly windowChanged?: (messages: number) => void,
  ) {
    this.resumeBelow = Math.max(1, Math.floor(max * RESUME_FRACTION));
    this.window = deliveryWindow(max, prefetch);
  }

  /** A delivery of `size` body bytes was taken. */
  received(size: number): void {
    this.bytes += size;
    if (this.windowChanged) this.resize(size);
    // Exceeded, not reached: a full window of bodies of the estimated size fills the bound exactly, and must not stop.
    if (!this.over && this.bytes > this.max) {
      this.over = true;
      this.changed(true);
    }
  }

  private resize(size: number): void {
    const estimate = this.sizeEstimate;
    // The first estimate was a guess, not a body seen: the first delivery replaces it.
    this.sizeEstimate = size >= estimate || !this.sized ? size : estimate - (estimate - size) / 32;
    this.sized = true;
    const wanted = deliveryWindow(this.max, this.prefetch, this.sizeEstimate);
    if (wanted < this.window || wanted >= this.window * 1.25 || (wanted === this.prefetch && this.window !== wanted)) {
      this.window = wanted;
      this.windowChanged?.(wanted);
    }
  }

  /** A job of `size` body bytes was settled. */
  settled(size: number): void {
    this.bytes -= size;
    if (this.over && this.bytes < this.resumeBelow) {
      this.over = false;
      this.changed(false);
    }
  }
}
