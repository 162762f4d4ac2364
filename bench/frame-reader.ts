/**
 * The STOMP frame reader's cost for a hostile header block: one MESSAGE frame whose head is N MiB of short header
 * lines (`k:v`, the same name over and over, so no distinct-header limit stops it), fed in 64 KiB chunks as a socket
 * delivers them, with the header limits lifted so that the whole block is parsed (what a reader without them does).
 * Sizes double from --from KiB (default 16) up to --mib MiB (default 100); a size that takes longer than --budget
 * seconds (default 60) is the last, and the top size is extrapolated from the last two measured (by the exponent
 * they show: 2 when the time quadruples per doubling) and marked so.
 *
 *   node --import tsx bench/frame-reader.ts                               # this checkout's reader
 *   node --import tsx bench/frame-reader.ts --reader /tmp/old-frame-reader.ts   # another one (e.g. `git show
 *       9828aec:src/endpoints/stomp/frame-reader.ts > src/endpoints/stomp/old-frame-reader.ts`, next to the new one so
 *       that its imports resolve; delete it after)
 *
 * It also reports, for the reader under test with its default limits (max-header-bytes 64 KiB), how many bytes it
 * read before refusing the block. CPU time of this process (user + system), not wall time. No broker needed.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const { values } = parseArgs({
  options: {
    reader: { type: 'string', default: 'src/endpoints/stomp/frame-reader.ts' },
    mib: { type: 'string', default: '100' },
    budget: { type: 'string', default: '60' },
    from: { type: 'string', default: '16' },
  },
});

interface Reader {
  push(chunk: Buffer): void;
}
type ReaderClass = new (version: string, limits: Record<string, number>, onFrame: (frame: unknown) => void) => Reader;

const CHUNK = 64 * 1024;
const LINE = Buffer.from('k:v\n');

/** `kib` KiB of `k:v` lines, in chunks of at most 64 KiB. */
function block(kib: number): Buffer[] {
  const size = Math.min(CHUNK, kib * 1024);
  const chunk = Buffer.alloc(size);
  for (let i = 0; i < size; i += LINE.length) LINE.copy(chunk, i);
  return Array.from({ length: (kib * 1024) / size }, () => chunk);
}

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** CPU ms to read the frame's head of `kib` KiB and its end, whether the frame came out whole, the bytes pushed. */
function run(Reader: ReaderClass, kib: number, limits: Record<string, number>): { ms: number; frames: number; error?: string; read: number } {
  let frames = 0;
  const reader = new Reader('1.2', limits, () => (frames += 1));
  const chunks = block(kib);
  let read = 0;
  const started = cpuMs();
  try {
    reader.push(Buffer.from('MESSAGE\n'));
    for (const c of chunks) {
      read += c.length;
      reader.push(c);
    }
    reader.push(Buffer.from('\nbody\0'));
  } catch (err) {
    return { ms: cpuMs() - started, frames, error: err instanceof Error ? err.message : String(err), read };
  }
  return { ms: cpuMs() - started, frames, read };
}

const path = resolve(values.reader);
const mod = (await import(pathToFileURL(path).href)) as { FrameReader: ReaderClass };
const unlimited = { maxLineLength: 256 * 1024, maxHeaders: 4096, maxHeaderBytes: Number.POSITIVE_INFINITY, maxFrameSize: Number.POSITIVE_INFINITY };
const budgetMs = Number(values.budget) * 1000;
const top = Number(values.mib);

console.log(`reader: ${values.reader}`);
console.log('| header block | CPU | MiB/s | |');
console.log('| ---: | ---: | ---: | --- |');
const measured: { kib: number; ms: number }[] = [];
const size = (kib: number): string => (kib >= 1024 ? `${kib / 1024} MiB` : `${kib} KiB`);
for (let kib = Number(values.from); ; kib = Math.min(kib * 2, top * 1024)) {
  const r = run(mod.FrameReader, kib, unlimited);
  measured.push({ kib, ms: r.ms });
  const note = r.error !== undefined ? `refused after ${(r.read / 1048576).toFixed(2)} MiB: ${r.error}` : r.frames === 1 ? 'frame read' : `${r.frames} frames`;
  console.log(`| ${size(kib)} | ${(r.ms / 1000).toFixed(2)} s | ${(kib / 1024 / (r.ms / 1000)).toFixed(2)} | ${note} |`);
  if (kib >= top * 1024) break;
  if (r.ms > budgetMs) {
    const [a, b] = measured.slice(-2) as [{ kib: number; ms: number }, { kib: number; ms: number }];
    const exponent = Math.log(b.ms / a.ms) / Math.log(b.kib / a.kib);
    const at = b.ms * ((top * 1024) / b.kib) ** exponent;
    const days = at / 86_400_000;
    console.log(
      `| ${top} MiB | ~${days >= 1 ? `${days.toFixed(0)} days` : `${(at / 1000).toFixed(0)} s`} | | extrapolated: time grows as size^${exponent.toFixed(2)} between ${size(a.kib)} and ${size(b.kib)}; not run |`,
    );
    break;
  }
}

// The same block with the default limits, at the largest size measured above (a reader without the limit reads it
// all; one with it stops within its first 64 KiB chunk).
const largest = measured[measured.length - 1]!.kib;
const limited = run(mod.FrameReader, largest, { maxLineLength: 256 * 1024, maxHeaders: 4096, maxHeaderBytes: 64 * 1024, maxFrameSize: 64 * 1024 * 1024 });
console.log(
  `with max-header-bytes 64 KiB, the ${size(largest)} block: ${limited.error !== undefined ? `refused within the first ${(limited.read / 1024).toFixed(0)} KiB, ${limited.ms.toFixed(1)} ms CPU (${limited.error})` : `not refused (${limited.frames} frame(s), ${(limited.ms / 1000).toFixed(2)} s: a reader without the limit)`}`,
);
