/**
 * A build of broker-bridge taken from git, for the tests that run two builds on one Redis: commit 415bc64, the last
 * that keeps the duplicate-ID cache in layout 1 (docs/operations.md#upgrading-the-cache-layout). Its src, package.json
 * and tsconfig.json are unpacked into a temporary folder, with this checkout's node_modules linked beside them; it runs
 * from source (tsx). A shallow clone is deepened from its origin first (checked: `git clone --depth 1`). It throws,
 * never skips, when the build cannot be made: a test that quietly stopped comparing the two builds would prove nothing.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** The last commit of layout 1. */
export const LAYOUT_ONE_COMMIT = '415bc64';
/** Its full name: a fetch by object name needs all of it. */
const LAYOUT_ONE_SHA = '415bc64a7d8505fb7882d675467078cd3517156f';
/** Fetches the commit from the clone's origin when this clone does not have it (unshallowing a shallow clone). */
const FETCH_IF_MISSING =
  'git -C "$1" cat-file -e "$2^{commit}" 2>/dev/null && exit 0; ' +
  'if [ "$(git -C "$1" rev-parse --is-shallow-repository)" = true ]; then git -C "$1" fetch --quiet --unshallow origin; ' +
  'else git -C "$1" fetch --quiet origin "$2"; fi';

const REPO = resolve(import.meta.dirname, '../..');

export interface OldBuild {
  dir: string;
  /** Its CLI, to run with `node --import tsx`. */
  cli: string;
  remove(): void;
}

export function layoutOneBuild(): OldBuild {
  const dir = mkdtempSync(join(tmpdir(), `broker-bridge-${LAYOUT_ONE_COMMIT}-`));
  try {
    // A shallow clone (CI's may be one) lacks the commit: fetch it from where the clone came from first.
    execFileSync('bash', ['-c', FETCH_IF_MISSING, 'fetch', REPO, LAYOUT_ONE_SHA], { stdio: ['ignore', 'ignore', 'pipe'] });
    // pipefail: a missing commit must fail here, not leave an empty folder behind a successful tar.
    execFileSync('bash', ['-c', 'set -o pipefail; git -C "$1" archive "$2" src package.json tsconfig.json | tar -x -C "$3"', 'archive', REPO, LAYOUT_ONE_COMMIT, dir], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const detail = (err as { stderr?: Buffer }).stderr?.toString().trim() ?? String(err);
    throw new Error(`cannot make the layout-1 build from commit ${LAYOUT_ONE_COMMIT} of ${REPO} (a shallow clone?): ${detail}`);
  }
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'));
  const cli = join(dir, 'src', 'cli.ts');
  if (!existsSync(cli) || !existsSync(join(dir, 'src', 'cache', 'scripts', 'reserve-5.lua'))) {
    throw new Error(`the build of commit ${LAYOUT_ONE_COMMIT} in ${dir} is not a layout-1 build (no src/cli.ts or reserve-5.lua)`);
  }
  return { dir, cli, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
