/**
 * Whether rhea is patched as this project needs it (patches/rhea+3.0.5.patch, reasons in patches/README.md): its
 * decoder recurses once per nested list or map, and unpatched, a message nested a few thousand deep throws out of the
 * frame reader and ends the connection, the broker redelivering the same message forever. Patched, such a transfer
 * reaches the source as `undecodable`, to be dead-lettered alone (./amqp10-source.ts).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

let checked = false;

/** A sentence for the log the first time it is asked in this process and rhea is not patched; else undefined. */
export function rheaGuardMissing(): string | undefined {
  if (checked) return undefined;
  checked = true;
  const require = createRequire(import.meta.url);
  // The package's `main` is lib/container.js; the patch is in lib/session.js beside it.
  const session = join(dirname(require.resolve('rhea')), 'session.js');
  if (readFileSync(session, 'utf8').includes("'undecodable'")) return undefined;
  return "rhea's message decoder is not patched (patches/rhea+3.0.5.patch; run `npx patch-package`): an AMQP 1.0 message nested a few thousand deep would end its source's connection, again and again";
}
