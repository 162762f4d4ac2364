/**
 * What the STOMP frame reader (./frame-reader.ts) and the skipper of a frame over a limit (./frame-skipper.ts) share:
 * the limits, and the error for a frame that crosses one or breaks the grammar.
 */
export interface FrameReaderLimits {
  /** Longest command or header line, bytes. */
  maxLineLength: number;
  /** Most distinct headers per frame. */
  maxHeaders: number;
  /** Most bytes of a frame's command and header lines, EOLs included (max-header-bytes). */
  maxHeaderBytes: number;
  /** Most bytes of a frame: its command and header lines and its body (max-frame-size). */
  maxFrameSize: number;
}

/** The limit a frame crossed, by its configuration name. */
export type StompLimit = 'max-frame-size' | 'max-header-bytes' | 'max-line-length' | 'max-headers';

export class StompProtocolError extends Error {
  override readonly name = 'StompProtocolError';
  constructor(
    message: string,
    /** The limit crossed; undefined for any other protocol error (malformed input). */
    readonly limit?: StompLimit,
  ) {
    super(message);
  }

  /** What bridge_protocol_errors_total counts it as: the limit, or `malformed`. */
  get reason(): string {
    return this.limit ?? 'malformed';
  }
}
