/**
 * The STOMP frame reader's cost for a hostile header block: one MESSAGE frame whose head is N MiB of short header
 * lines (`k:v`, the same name over and over, so no distinct-header limit stops it), fed in 64 KiB chunks as a socket
 * delivers them, with the header limits lifted so that the whole block is parsed (what a reader without them does).
 * Sizes double from --from KiB (default 16) up to --mib MiB (default 100); a size that takes longer than --budget
 * seconds (default 60) is the last, and the top size is extrapolated from the last two measured (by the exponent
 * they show: 2 when the time quadruples per doubling) and marked so.
 *
 *   node --import tsx bench/frame-reader.ts                               # this checkout's reader
 *   node --import tsx bench/frame-reader.ts --reader <file>   # another one: e.g. the reader of commit 9828aec
 *       (`git show 9828aec:src/endpoints/stomp/frame-reader.ts`) saved as old-frame-reader.ts in the same folder as
 *       the new one, so that its imports resolve; delete it after
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

// The ordinary case, which must not get slower: 200,000 MESSAGE frames as ActiveMQ sends them (10 headers, a 1 KiB
// text body), in 64 KiB chunks that cut frames anywhere. Median of 5 rounds.
{
  const one = Buffer.from(
    'MESSAGE\ncontent-type:text/plain\nmessage-id:ID\\cbroker-1234-5678\\c1\\c1\\c1\\c42\ndestination:/queue/orders\n' +
      'subscription:sub-1\nack:ID\\cbroker-1234-5678\\c1\\c1\\c1\\c42\npriority:4\npersistent:true\ntimestamp:1765000000000\n' +
      'expires:0\n_AMQ_DUPL_ID:order-000042\n\n' +
      'x'.repeat(1024) +
      '\0\n',
  );
  const FRAMES = 200_000;
  const stream = Buffer.concat(Array.from({ length: 1000 }, () => one));
  const chunks: Buffer[] = [];
  for (let i = 0; i < stream.length; i += CHUNK) chunks.push(stream.subarray(i, i + CHUNK));
  const rounds: number[] = [];
  for (let r = 0; r < 5; r++) {
    let frames = 0;
    const reader = new mod.FrameReader('1.2', { maxLineLength: 256 * 1024, maxHeaders: 4096, maxHeaderBytes: 64 * 1024, maxFrameSize: 64 * 1024 * 1024 }, () => (frames += 1));
    const started = cpuMs();
    for (let k = 0; k < FRAMES / 1000; k++) for (const c of chunks) reader.push(c);
    rounds.push(cpuMs() - started);
    if (frames !== FRAMES) throw new Error(`read ${frames} frames of ${FRAMES}`);
  }
  const ms = rounds.sort((a, b) => a - b)[2]!;
  console.log(`ordinary frames: ${FRAMES} MESSAGE frames of ${one.length} bytes in 64 KiB chunks: ${((ms * 1e6) / FRAMES).toFixed(0)} ns per frame (median of 5)`);
}
