/**
 * What this proves: the upgrade of the cache from layout 1 to layout 2 on a running system, as docs/operations.md
 * "Upgrading the cache layout" tells it, with real `broker-bridge run` processes of two builds on one Redis and
 * RabbitMQ: the layout-1 build is commit 415bc64 from git (test/support/old-build.ts: the test fails, never skips,
 * without it), the layout-2 build is this checkout's dist/cli.js.
 * 1. The old build forwards 20 messages and stops; copies of them come back with 5 new ones.
 * 2. Started while an old process is alive on the same Redis and prefix, the new build refuses with a sentence and
 *    consumes nothing.
 * 3. Once the old one stopped, the new build moves the address's keys and drops the 20 copies as duplicates: the target
 *    holds each of the 25 IDs once.
 * 4. An old process started later (a rollback, a forgotten host) forwards nothing for the moved address: its bridge
 *    stops at the first cache call, the messages stay in the source.
 * 5. The new build again: the copies that waited are dropped, the new ones forwarded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { layoutOneBuild, type OldBuild } from '../support/old-build.js';
import { sleep, until } from '../support/wait.js';
import { copiesById, type ReceivedMessage } from '../support/amqp.js';

const ID = '_AMQ_DUPL_ID';
const fx = useBridgeFixture();
let old: OldBuild;
let OLD_ENV: Record<string, string>;

beforeAll(() => {
  old = layoutOneBuild();
  OLD_ENV = { BRIDGE_CLI: old.cli, BRIDGE_NODE_ARGS: '--import tsx' };
});
afterAll(() => old.remove());

function messages(from: number, n: number): { body: Buffer; options: { headers: Record<string, string> } }[] {
  return Array.from({ length: n }, (_, i) => ({ body: Buffer.from(`u ${from + i}`), options: { headers: { [ID]: `u-${from + i}` } } }));
}

const ids = (ms: readonly ReceivedMessage[]) => ms.map((m) => String(m.headers[ID])).sort();
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => `u-${from + i}`).sort();
const running = (l: { msg: string }) => l.msg === 'bridge running';

describe('upgrading the cache layout with processes of two builds on one Redis', () => {
  it('old forwards, new refuses beside a live old one, then drops the copies; an old one started later forwards nothing', async () => {
    const [src, dst, idleSrc, idleDst] = await fx.queues('upg-src', 'upg-dst', 'upg-idle-src', 'upg-idle-dst');
    const c = fx.config({ bridges: [{ name: 'up', sourceQueue: src!, target: `queue: "${dst}"` }] });
    // Another bridge of the old build on the same Redis and key prefix, on queues of its own.
    const other = fx.config({ bridges: [{ name: 'other', sourceQueue: idleSrc!, target: `queue: "${idleDst}"` }] });
    const otherYaml = other.yaml.split(other.keyPrefix).join(c.keyPrefix);
    const count = (q: string) => fx.amqp.count(q);

    // 1. The old build forwards 20 messages, and stops.
    await fx.amqp.publish(src!, messages(0, 20));
    const first = fx.spawn(c.yaml, OLD_ENV);
    await first.waitForLog(running, 60_000);
    await until('20 forwarded by the old build', async () => (await count(dst!)) === 20, { timeoutMs: 30_000 });
    expect(await first.stop()).toBe(0);
    // Copies of them come back (a publisher's retry, a redelivery), with 5 new ones.
    await fx.amqp.publish(src!, messages(0, 25));

    // 2. The new build beside a live old process: it refuses, and takes nothing.
    const oldOne = fx.spawn(otherYaml, OLD_ENV);
    await oldOne.waitForLog(running, 60_000);
    const refused = fx.spawn(c.yaml);
    const code = await refused.waitExit();
    expect(code).not.toBe(0);
    const said = [...refused.stderr, ...refused.lines].join('\n');
    expect(said).toMatch(/in use by 1 process of an older broker-bridge build .* stop every process of the older build first/);
    expect(await count(src!)).toBe(25);
    expect(await count(dst!)).toBe(20);

    // 3. The old process stopped, the new build starts (after its key lapsed), moves the keys and drops the copies.
    expect(await oldOne.stop()).toBe(0);
    const upgraded = fx.spawn(c.yaml);
    await upgraded.waitForLog(running, 30_000);
    await until('the source drained', async () => (await count(src!)) === 0 && (await count(dst!)) === 25, { timeoutMs: 30_000 });
    await sleep(1000);
    const after = await fx.amqp.drain(dst!);
    expect(ids(after)).toEqual(range(0, 25));
    expect(copiesById(after).unflaggedExtras).toEqual([]);
    expect(upgraded.count((l) => /from layout 1 to layout 2/.test(l.msg))).toBeGreaterThanOrEqual(1);
    expect(await upgraded.stop()).toBe(0);

    // 4. An old process started later: 5 more copies and 3 new messages wait; it forwards none of them.
    await fx.amqp.publish(src!, [...messages(20, 5), ...messages(25, 3)]);
    const late = fx.spawn(c.yaml, OLD_ENV);
    await late.waitForLog((l) => /WRONGTYPE/.test(JSON.stringify(l)), 60_000);
    await sleep(2000);
    expect(await count(dst!)).toBe(0);
    await late.stop();
    await until('the late process let go of the messages', async () => (await count(src!)) === 8, { timeoutMs: 10_000 });

    // 5. The new build again: the 5 copies are dropped, the 3 new ones forwarded.
    const again = fx.spawn(c.yaml);
    await again.waitForLog(running, 30_000);
    await until('the source drained again', async () => (await count(src!)) === 0, { timeoutMs: 30_000 });
    await sleep(1000);
    expect(ids(await fx.amqp.drain(dst!))).toEqual(range(25, 3));
    expect(await again.stop()).toBe(0);
  });
});
