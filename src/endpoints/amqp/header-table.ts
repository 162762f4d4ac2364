/**
 * What the AMQP source needs of amqplib's field-table decoder as this project patches it (patches/amqplib+2.3.1.patch,
 * reasons in patches/README.md; docs/design.md §10.2): the decoder is iterative, never throws out of the frame parser,
 * and hands a header table nested deeper than its limit, or one it cannot decode, as an empty table marked with a
 * registered symbol. The message comes with its body and its other properties; the source hands it on as unreadable
 * (`malformed-headers`, the headers dropped), and the session dead-letters it alone: one bad message costs one message,
 * not the connection every bridge on it shares.
 *
 * Without the patch (an install that skipped `postinstall`), amqplib's recursive decoder is back: a deep table then
 * closes the shared connection again. The source says so once, in an error line, when it opens (guardMissing).
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The symbol the patched decoder marks an undecodable table with (Symbol.for: no import of amqplib's internals). */
const UNDECODABLE = Symbol.for('amqplib.undecodableTable');

/** Why the decoder gave up on a header table. */
export interface UndecodableTable {
  /** `too-deep`: nested deeper than the decoder's limit; `malformed`: an unknown type tag or a length past its end. */
  reason: 'too-deep' | 'malformed';
  /** The decoder's sentence. */
  message: string;
  /** The encoded table's size in bytes. */
  size: number;
}

/** The mark on a decoded `headers` property, or undefined for a table that decoded (or no headers at all). */
export function undecodableHeaders(headers: unknown): UndecodableTable | undefined {
  if (headers === null || typeof headers !== 'object') return undefined;
  const mark: unknown = Reflect.get(headers, UNDECODABLE);
  if (mark === null || typeof mark !== 'object') return undefined;
  const { reason, message, size } = mark as Record<string, unknown>;
  return {
    reason: reason === 'too-deep' ? 'too-deep' : 'malformed',
    message: typeof message === 'string' ? message : 'the header table cannot be decoded',
    size: typeof size === 'number' ? size : 0,
  };
}

/**
 * The nesting limit of the installed decoder, or undefined when amqplib is not patched (its codec has no limit). Read
 * from amqplib's own codec module by path: its package `exports` hide lib/, and the patch is what puts the limit there.
 */
export function headerDepthLimit(): number | undefined {
  const require = createRequire(import.meta.url);
  const codec = require(join(dirname(require.resolve('amqplib')), 'lib', 'codec.js')) as { MAX_TABLE_DEPTH?: unknown };
  return typeof codec.MAX_TABLE_DEPTH === 'number' ? codec.MAX_TABLE_DEPTH : undefined;
}

let checked = false;

/** A sentence for the log the first time it is asked in this process and amqplib's decoder is not guarded; else undefined. */
export function guardMissing(): string | undefined {
  if (checked) return undefined;
  checked = true;
  if (headerDepthLimit() !== undefined) return undefined;
  return "amqplib's header-table decoder is not patched (patches/amqplib+2.3.1.patch; run `npx patch-package`): a message with headers nested a few thousand deep would close the shared AMQP connection, for every bridge on it, again and again";
}
