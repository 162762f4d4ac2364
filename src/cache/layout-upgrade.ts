/**
 * The upgrade of the cache's Redis layout from 1 (builds up to 415bc64: `at`, `res`, `res-exp` per address) to 2 (one
 * `st` hash per address; docs/design.md §4.2), on a running system (docs/operations.md#upgrading-the-cache-layout):
 *
 * - Data: a hash tag's layout-1 keys are moved on first touch. The epoch guard answers OLD_LAYOUT while the tag's
 *   epoch marker is still layout 1's string, or is a hash with `m` set; RedisIdCache then calls migrate-5.lua, a
 *   bounded slice per call, until it is done, and goes on. Recorded IDs keep their order and times (`ids` and `seq` stay
 *   where they are), reservations their owner, expiry and flag, markers stay. A restart across the upgrade keeps the
 *   cache's memory.
 * - Old processes: layout 2 keeps the epoch marker as a hash, which every script of a layout-1 build reads with GET
 *   first: it fails with WRONGTYPE before writing anything, its session ends with that error and its bridge stops,
 *   its messages unacked. So an old process started later cannot answer from keys it no longer understands.
 * - Mixed processes: the two builds cannot share addresses (an old process would stop at the first one a new one
 *   touched), so a new process refuses to start while a process of the old build is alive: liveness keys carry the
 *   writer's layout (LIVENESS_VALUE in ./owner-liveness.ts), and layout 1 wrote '1'.
 */
import { Cluster, type Redis } from 'ioredis';
import { ConfigError, TransientError } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';
import { addressKeys, epochKey, layoutOneKeys, tagSafe } from './keys.js';
import { LIVENESS_TTL_MS } from './owner-liveness.js';
import type { CacheClient } from './redis-client.js';
import { decodeScriptReply } from './script-status.js';

/** Most layout-1 entries one migrate call moves: about a millisecond of Redis's time (id-cache-size may be large). */
const MIGRATE_SLICE = 1000;

type MigrateFn = (...args: (string | number)[]) => Promise<unknown>;

/**
 * Moves the layout-1 keys of one hash tag (a target address, or a source whose epoch marker is still a string) into
 * layout 2, a slice per call, until migrate-5.lua says done. Errors are the caller's to translate.
 */
export async function migrateTag(redis: CacheClient, prefix: string, tag: string): Promise<number> {
  const fn = (redis as unknown as Record<'migrate', MigrateFn>).migrate;
  const k = addressKeys(prefix, tag);
  const old = layoutOneKeys(prefix, tag);
  for (let calls = 1; ; calls++) {
    const reply = await fn.apply(redis, [epochKey(prefix, tag), old.at, old.res, old.resExp, k.st, MIGRATE_SLICE]);
    const { fields } = decodeScriptReply('migrate', reply);
    if (Number(fields[0]) === 1) return calls;
  }
}

/** A glob pattern matching `text` literally (SCAN's MATCH treats `*?[]\` as special). */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** The processes whose liveness key under `prefix` says layout 1 ('1'), on every master of a Cluster. */
export async function layoutOneProcesses(redis: CacheClient, prefix: string): Promise<string[]> {
  const nodes: Redis[] = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const pattern = `${globLiteral(tagSafe(prefix))}:live:*`;
  const found: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        // Read where the key lives (a Cluster node answers for its own slots only).
        if ((await node.get(key)) === '1') found.push(/\{(.*)\}$/.exec(key)?.[1] ?? key);
      }
    } while (cursor !== '0');
  }
  return found;
}

/**
 * Throws ConfigError, with what to do, while a process of a layout-1 build is alive on this Redis under this prefix.
 * One that was just stopped has its key for up to LIVENESS_TTL_MS more: found ones are looked for again after that.
 * Waits (logging once) while Redis is unreachable: no bridge starts before this is known. Any other error is left to
 * the bridges, which stop with its sentence at their first cache call.
 */
export async function refuseBesideLayoutOne(redis: CacheClient, prefix: string, where: string, log: Logger, translate: (err: unknown) => Error): Promise<void> {
  let logged = false;
  for (let look = 0; ; ) {
    let found: string[];
    try {
      found = await layoutOneProcesses(redis, prefix);
    } catch (err) {
      const e = translate(err);
      if (!(e instanceof TransientError)) {
        // Redis answers but cannot be used by this process (TLS, credentials, an ACL without SCAN): the bridges meet
        // the same error at their first cache call and stop with its sentence, as without this check. A process of an
        // older build beside this one is then not looked for; it stops at the first address this one moves (the fence).
        log.warn(`could not look for processes of an older build on Redis at ${where} (${e.message}); not checked`);
        return;
      }
      if (!logged) log.warn(`cannot look for processes of an older build on Redis at ${where} yet (${e.message}); the bridges start once it answers`);
      logged = true;
      await new Promise((r) => setTimeout(r, 1000));
      continue;
    }
    if (found.length === 0) return;
    if (++look >= 2) {
      throw new ConfigError(
        `Redis at ${where} is in use by ${found.length} process${found.length === 1 ? '' : 'es'} of an older broker-bridge build (${found.slice(0, 5).join(', ')}${found.length > 5 ? ', …' : ''}: liveness keys ${tagSafe(prefix)}:live:{…} holding '1') that keep the duplicate-ID cache in layout 1, which this build replaces: stop every process of the older build first (their keys go ${LIVENESS_TTL_MS / 1000} s after they stop), then start this build; it moves the cache's keys into layout 2 as it meets them (docs/operations.md#upgrading-the-cache-layout)`,
      );
    }
    log.info({ processes: found }, `processes of an older build are alive on Redis at ${where}; looking again in ${LIVENESS_TTL_MS} ms (a stopped one's key lapses by then)`);
    await new Promise((r) => setTimeout(r, LIVENESS_TTL_MS + 300));
  }
}
