/**
 * The operator page's replay control (src/service/page/assets/page.js) in Debian's Chromium (test/support/browser.ts)
 * against a real `broker-bridge run` and RabbitMQ: offered only for a bridge whose dead letters can be read back, and
 * only with the token; a wrong token is refused and changes nothing; with the right one a dry run shows the counts by
 * reason in the confirmation, a declined confirmation replays nothing, an accepted one replays them and says so.
 */
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { launchChromium } from '../support/browser.js';
import { uniqueName } from '../support/services.js';

const fx = useBridgeFixture();
const ID = '_AMQ_DUPL_ID';
let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

async function text(page: Page, selector: string): Promise<string> {
  return String(await page.evaluate(`document.querySelector(${JSON.stringify(selector)})?.textContent ?? ''`));
}

async function textMatches(page: Page, selector: string, re: RegExp, timeout = 30_000): Promise<void> {
  await page.waitForFunction(`new RegExp(${JSON.stringify(re.source)}).test(document.querySelector(${JSON.stringify(selector)})?.textContent ?? '')`, { timeout });
}

function deadLetter(id: string, reason: string) {
  return { body: Buffer.from(id), options: { headers: { [ID]: id, 'x-bridge-dead-letter-reason': reason, 'x-bridge-dead-lettered-at': new Date().toISOString() }, persistent: true } };
}

describe('operator page: replay dead letters', () => {
  it('dry run by reason in the confirmation, then the replay; declined: nothing; refused without the right token', { timeout: 120_000 }, async () => {
    const [src, dst, dlq, src2, dst2] = await fx.queues('pr-src', 'pr-dst', 'pr-dlq', 'pr-src2', 'pr-dst2');
    const token = `t-${uniqueName('pr')}`;
    const { yaml } = fx.config({
      bridges: [
        { name: 'rp', sourceQueue: src!, target: `queue: "${dst}"`, deadLetter: `connection: rabbit, queue: "${dlq}"` },
        // Dead letters to an exchange: nothing to read back, no replay offered.
        { name: 'to-exchange', sourceQueue: src2!, target: `queue: "${dst2}"`, deadLetter: 'connection: rabbit, exchange: amq.fanout, routing-key: ""' },
      ],
      top: { 'http-port': 0, 'admin-token': token },
    });
    const bridge = await fx.start(yaml, 2);
    await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
    const api = `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
    await fx.amqp.publish(dlq!, [deadLetter('p1', 'unroutable'), deadLetter('p2', 'unsafe-address'), deadLetter('p3', 'unroutable')]);

    const page = await browser.newPage();
    const dialogs: string[] = [];
    const answers: boolean[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void (answers.shift() ?? true ? d.accept() : d.dismiss());
    });
    await page.goto(`${api}/`);
    await page.waitForSelector('tr[data-bridge="to-exchange"]');
    // Without a token: read-only, no replay control.
    expect(await page.$$('button[data-action="replay"]')).toHaveLength(0);

    // A wrong token: the dry run is refused, nothing changes.
    await page.type('#token', `${token}-wrong`);
    await page.click('#token-use');
    await page.waitForSelector('button[data-bridge="rp"][data-action="replay"]');
    expect(await page.$$('button[data-bridge="to-exchange"][data-action="replay"]')).toHaveLength(0);
    await page.click('button[data-bridge="rp"][data-action="replay"]');
    await textMatches(page, '#outcome', /refused \(401\)/);
    expect(await text(page, '#outcome')).toBe("replay the dead letters of bridge 'rp': refused (401): the admin token is wrong");
    expect(dialogs).toEqual([]);

    await page.click('#token-forget');
    await page.type('#token', token);
    await page.click('#token-use');
    await page.waitForSelector('button[data-bridge="rp"][data-action="replay"]');
    // Declined after the dry run: nothing replayed.
    answers.push(false);
    await page.click('button[data-bridge="rp"][data-action="replay"]');
    await textMatches(page, '#outcome', /not done/);
    const found = '3 to replay, by reason: unroutable: 2, unsafe-address: 1 (skipped 0, left 0)';
    expect(dialogs).toEqual([`Replay the dead letters of bridge 'rp'? The dry run found ${found}.`]);
    await fx.amqp.settledCount(dlq!, 500);
    expect([await fx.amqp.count(dlq!), await fx.amqp.count(dst!)]).toEqual([3, 0]);

    // Accepted: replayed.
    await page.waitForSelector('button[data-bridge="rp"][data-action="replay"]');
    await page.click('button[data-bridge="rp"][data-action="replay"]');
    await textMatches(page, '#outcome', /: done; replayed/);
    expect(await text(page, '#outcome')).toMatch(/^replay the dead letters of bridge 'rp': done; replayed 3, dropped as already delivered 0, flagged \d+, refused again 0, skipped 0, left 0$/);
    expect(dialogs).toHaveLength(2);
    await fx.amqp.settledCount(dst!, 500);
    expect([await fx.amqp.count(dlq!), await fx.amqp.count(dst!)]).toEqual([0, 3]);
  });
});
