/**
 * The script loader of the Redis duplicate-ID cache: reads the Lua scripts of ./scripts/ (one file per step of the
 * protocol, named `<name>-<numberOfKeys>.lua`), inlines their shared fragments (`--#include`), puts the epoch guard
 * (epoch-guard.inc.lua) in front of every script but the epoch and migrate scripts, and defines them as ioredis commands.
 * A script whose behaviour changes gets a new file name (its number bumped, BullMQ style), so that processes of two
 * versions never run each other's scripts under one name.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';

/**
 * Script name (camelCase of the file name without its `-<numberOfKeys>` suffix) → number of keys; `n` (file suffix
 * `-n`): as many keys as the call brings (all of one hash tag), passed as the first argument.
 */
export const SCRIPT_KEYS = {
  reserve: 4,
  commit: 4,
  release: 2,
  recorded: 1,
  migrate: 5,
  stampRecord: 'n',
  stampClaim: 1,
  stampForget: 'n',
  stampRelease: 1,
  stampDone: 1,
  stampRenew: 1,
  epoch: 1,
} as const;

/** The scripts without the epoch guard in front: they read and write the epoch marker themselves. */
const UNGUARDED: ReadonlySet<ScriptName> = new Set(['epoch', 'migrate']);

export type ScriptName = keyof typeof SCRIPT_KEYS;
export type GuardedScript = Exclude<ScriptName, 'epoch' | 'migrate'>;

export interface ScriptDefinition {
  lua: string;
  /**
   * Keys the call passes, the epoch marker's included; undefined for a script that takes any number of keys (ioredis
   * then expects the count as the first argument).
   */
  numberOfKeys?: number;
  /** Whether the epoch guard runs first: the call then passes the marker's key and what this process saw of it first. */
  guarded: boolean;
  /** The keys the script's own header documents (its file name's suffix). */
  declaredKeys: number | 'n';
}

let loadedScripts: Record<ScriptName, ScriptDefinition> | undefined;

/**
 * Reads the Lua scripts that sit next to this module (src/cache/scripts when run from source, dist/cache/scripts
 * after the build copied them). Throws at once when one is missing, rather than on the first message.
 */
export function loadScripts(): Record<ScriptName, ScriptDefinition> {
  if (loadedScripts) return loadedScripts;
  const dir = new URL('./scripts/', import.meta.url);
  const found = new Map<string, ScriptDefinition>();
  for (const file of readdirSync(dir)) {
    const m = /^([a-z][a-z0-9-]*)-(\d+|n)\.lua$/.exec(file);
    if (!m || m[1] === undefined || m[2] === undefined) continue;
    const name = m[1].replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());
    const guarded = !UNGUARDED.has(name as ScriptName);
    const body = withIncludes(readFileSync(new URL(file, dir), 'utf8'), dir);
    // The guard takes one key (the epoch marker) and one argument off the front of KEYS and ARGV.
    const lua = guarded ? `${readFileSync(new URL('epoch-guard.inc.lua', dir), 'utf8')}\n${body}` : body;
    const keys = m[2] === 'n' ? undefined : Number(m[2]) + (guarded ? 1 : 0);
    found.set(name, { lua, ...(keys === undefined ? {} : { numberOfKeys: keys }), guarded, declaredKeys: m[2] === 'n' ? 'n' : Number(m[2]) });
  }
  const scripts = {} as Record<ScriptName, ScriptDefinition>;
  for (const [name, keys] of Object.entries(SCRIPT_KEYS) as [ScriptName, number | 'n'][]) {
    const def = found.get(name);
    if (!def || def.declaredKeys !== keys) {
      throw new Error(
        `duplicate-ID cache script ${name} (${keys} keys) is missing from ${fileURLToPath(dir)}; the build must copy src/cache/scripts/*.lua there`,
      );
    }
    scripts[name] = def;
  }
  loadedScripts = scripts;
  return scripts;
}

/**
 * Inlines the shared fragments a script names on a line `--#include <file>` (indentation allowed; files next to the
 * scripts; a missing one fails loading at start): Redis runs each script as one self-contained chunk, so code two
 * scripts share is written once and copied in here.
 */
function withIncludes(lua: string, dir: URL): string {
  return lua.replace(/^[ \t]*--#include (\S+)[ \t]*$/gm, (_, file: string) => readFileSync(new URL(file, dir), 'utf8').trimEnd());
}

/** Defines every cache script as a command on a client (also used by tests that call a script directly). */
export function defineScripts(redis: Redis | Cluster): void {
  for (const [name, def] of Object.entries(loadScripts())) {
    redis.defineCommand(name, def.numberOfKeys === undefined ? { lua: def.lua } : { lua: def.lua, numberOfKeys: def.numberOfKeys });
  }
}
