/**
 * The address batcher of the Redis duplicate-ID cache: calls for one address (or one source, for stamp writes) made
 * while one callback runs leave as one script call, in chunks of at most MAX_BATCH, with at most MAX_IN_FLIGHT calls
 * of one address out at a time; and the packed argument those calls carry their id/token pairs in.
 */

/** What a batched call carries for one message; reserve and commit use `id` and `token` only. */
export interface IdToken {
  id: string;
  token: string;
}

/** A stamp record (or forget: `token` and `flagged` unused) of one source. */
export interface StampWrite extends IdToken {
  key: string;
  flagged: boolean;
}

export type BatchItem<R, P extends IdToken = IdToken> = P & {
  resolve(result: R): void;
  reject(err: unknown): void;
};

/**
 * The pairs after the first, as the scripts' one packed argument, or nothing: MessagePack, three values in a row — the
 * number of pairs, the array of their IDs, the array of their tokens (strings, UTF-8) — which the scripts decode with
 * Redis's built-in cmsgpack (scripts/id-token-pairs.inc.lua). One argument rather than two per ID: the client then
 * builds one buffer instead of a command of hundreds of pieces (a third less client CPU per call of 200 IDs, 0.6 →
 * 0.4 ms). MessagePack rather than the earlier `<bytes>:<id><bytes>:<token>` text: the scripts' parse of that text in
 * Lua cost Redis ~0.55 µs per ID and call (bench/redis-cpu.ts), cmsgpack's C decoder a few tenths of that.
 */
export function packPairs(items: readonly { id: string; token: string }[]): Buffer[] {
  const n = items.length;
  if (n === 0) return [];
  // At most 3 bytes of UTF-8 per UTF-16 unit, and 5 bytes of header per string.
  let size = 16;
  for (let i = 0; i < n; i++) size += 3 * (items[i]!.id.length + items[i]!.token.length) + 10;
  const out = Buffer.allocUnsafe(size);
  let o = writeUint(out, 0, n);
  o = writeArrayHeader(out, o, n);
  for (let i = 0; i < n; i++) o = writeStr(out, o, items[i]!.id);
  o = writeArrayHeader(out, o, n);
  for (let i = 0; i < n; i++) o = writeStr(out, o, items[i]!.token);
  return [out.subarray(0, o)];
}

/** A MessagePack unsigned integer (positive fixint, uint 16 or uint 32) at `o`; returns the offset after it. */
function writeUint(out: Buffer, o: number, value: number): number {
  if (value < 128) {
    out[o] = value;
    return o + 1;
  }
  if (value < 65536) {
    out[o] = 0xcd;
    out.writeUInt16BE(value, o + 1);
    return o + 3;
  }
  out[o] = 0xce;
  out.writeUInt32BE(value, o + 1);
  return o + 5;
}

function writeArrayHeader(out: Buffer, o: number, length: number): number {
  if (length < 16) {
    out[o] = 0x90 | length;
    return o + 1;
  }
  if (length < 65536) {
    out[o] = 0xdc;
    out.writeUInt16BE(length, o + 1);
    return o + 3;
  }
  out[o] = 0xdd;
  out.writeUInt32BE(length, o + 1);
  return o + 5;
}

/** A MessagePack str: written 5 bytes on (room for the longest header), then moved back behind its header. */
function writeStr(out: Buffer, o: number, text: string): number {
  const bytes = out.write(text, o + 5, 'utf8');
  let head: number;
  if (bytes < 32) {
    out[o] = 0xa0 | bytes;
    head = 1;
  } else if (bytes < 256) {
    out[o] = 0xd9;
    out[o + 1] = bytes;
    head = 2;
  } else if (bytes < 65536) {
    out[o] = 0xda;
    out.writeUInt16BE(bytes, o + 1);
    head = 3;
  } else {
    out[o] = 0xdb;
    out.writeUInt32BE(bytes, o + 1);
    head = 5;
  }
  if (head !== 5) out.copyWithin(o + head, o + 5, o + 5 + bytes);
  return o + head + bytes;
}

/** Most pairs per script call: keeps one call's time inside Redis short (~10 µs a pair). */
const MAX_BATCH = 200;

/**
 * Most calls of one batcher in flight per address. Calls made while they are out wait and leave together when one
 * returns, so batches grow with the load instead of with how deliveries happen to be grouped: a STOMP source hands
 * over one frame per socket read, and with a call per read the reserves and commits of STOMP→AMQP went out ~1.5 IDs
 * per script call (26,266 calls for 20,000 messages in the bench), each paying the script's fixed cost in Redis
 * (~40 µs: the epoch guard's INFO, TIME, housekeeping) and a command in the client. Two, not one, so that a batch is
 * always being gathered while the other is answered.
 */
const MAX_IN_FLIGHT = 2;

/**
 * Collects calls per address until the current callback returns, and hands them over in chunks of at most MAX_BATCH,
 * with at most MAX_IN_FLIGHT chunks of one address out at a time (the rest wait for one to return).
 */
export class AddressBatcher<R, P extends IdToken = IdToken> {
  private queued = new Map<string, BatchItem<R, P>[]>();
  private readonly inFlight = new Map<string, number>();
  private scheduled = false;

  constructor(private readonly send: (address: string, items: BatchItem<R, P>[]) => Promise<void>) {}

  /** `payload` must be a fresh object of the caller's: it becomes the batch item (a spread copy of it cost ~3 µs a call). */
  add(address: string, payload: P): Promise<R> {
    const item = payload as BatchItem<R, P>;
    const promise = new Promise<R>((resolve, reject) => {
      item.resolve = resolve;
      item.reject = reject;
    });
    this.enqueue(address, item);
    return promise;
  }

  /**
   * Many calls as one: resolves when every one of them has (their results are not kept), rejects with the first error.
   * One promise and two functions for the lot instead of a promise and two resolving functions each (lever 4 of issue
   * 23: less garbage per message). `payloads` must be fresh objects of the caller's, for one use: they become
   * the batch items, and a chunk still out when another failed may resolve its items later.
   */
  addAll(address: string, payloads: readonly P[]): Promise<void> {
    if (payloads.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      let left = payloads.length;
      // A promise settles once: the first rejection wins, and a resolve after it is a no-op.
      const one = (): void => {
        if (--left === 0) resolve();
      };
      for (const payload of payloads) {
        const item = payload as BatchItem<R, P>;
        item.resolve = one;
        item.reject = reject;
        this.enqueue(address, item);
      }
    });
  }

  private enqueue(address: string, item: BatchItem<R, P>): void {
    const list = this.queued.get(address);
    if (list) list.push(item);
    else this.queued.set(address, [item]);
    if (!this.scheduled) {
      this.scheduled = true;
      // nextTick, not setImmediate: the calls made while one socket read is handled (a burst of deliveries or
      // confirms) still form one batch, without waiting behind the rest of the event loop (~3 ms measured).
      process.nextTick(() => this.flush());
    }
  }

  private flush(): void {
    this.scheduled = false;
    for (const address of [...this.queued.keys()]) this.sendQueued(address);
  }

  /** Sends what waits for `address`, as far as the in-flight limit allows; the rest goes when a call returns. */
  private sendQueued(address: string): void {
    const items = this.queued.get(address);
    if (items === undefined) return;
    let out = this.inFlight.get(address) ?? 0;
    let i = 0;
    while (i < items.length && out < MAX_IN_FLIGHT) {
      const chunk = items.slice(i, i + MAX_BATCH);
      i += chunk.length;
      out += 1;
      this.send(address, chunk)
        .catch((err: unknown) => {
          for (const item of chunk) item.reject(err);
        })
        .finally(() => this.returned(address));
    }
    this.inFlight.set(address, out);
    if (i >= items.length) this.queued.delete(address);
    else this.queued.set(address, i === 0 ? items : items.slice(i));
  }

  private returned(address: string): void {
    const out = (this.inFlight.get(address) ?? 1) - 1;
    if (out === 0) this.inFlight.delete(address);
    else this.inFlight.set(address, out);
    this.sendQueued(address);
  }
}
