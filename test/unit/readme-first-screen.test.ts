/**
 * The README's first screen (its first 40 lines): what broker-bridge is, the two set-up commands, and a table of what
 * it does with a link per row into docs/. The commands are held to what the repository has: `npm ci` needs the lock
 * file, `npm test` a script, `docker compose up --build` a compose file whose bridge service builds from the code
 * (test/integration/compose.test.ts checks the file further, test/unit/docs-links.test.ts every link).
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const root = resolve(import.meta.dirname, '../..');
const lines = readFileSync(resolve(root, 'README.md'), 'utf8').split('\n');
const screen = lines.slice(0, 40);

describe("the README's first screen", () => {
  it('says what it is in the lines under the title', () => {
    expect(screen[0]).toBe('# broker-bridge');
    const what = screen.slice(2, screen.indexOf('', 2)).join(' ');
    expect(screen.indexOf('', 2) - 2, 'lines of the opening paragraph').toBeLessThanOrEqual(3);
    expect(what).toMatch(/store-and-forward bridge between message brokers/);
  });

  it('shows the two set-up commands, and the repository has what they need', () => {
    const start = screen.indexOf('## Start');
    expect(start, 'a "## Start" section on the first screen').toBeGreaterThan(0);
    const open = screen.indexOf('```sh', start);
    const close = screen.indexOf('```', open + 1);
    expect(open).toBeGreaterThan(start);
    const commands = screen.slice(open + 1, close).map((l) => l.replace(/\s+#.*$/, '').trim());
    expect(commands).toEqual(['docker compose up --build', 'npm ci && npm test']);
    expect(existsSync(resolve(root, 'package-lock.json')), 'npm ci needs package-lock.json').toBe(true);
    const pkg = JSON.parse(readFileSync(resolve(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.test, 'an npm test script').toBeDefined();
    const compose = parse(readFileSync(resolve(root, 'docker-compose.yml'), 'utf8')) as { services: Record<string, { build?: unknown }> };
    expect(compose.services.bridge?.build, 'the bridge service builds from the code (--build)').toBeDefined();
  });

  it('has a table of what it does, each row linking into docs/', () => {
    const rows = screen.filter((l) => l.startsWith('| ') && !/^\| -/.test(l) && l !== '| | |');
    expect(rows.length).toBeGreaterThanOrEqual(6);
    for (const row of rows) expect(row, row).toMatch(/\]\(docs\/[\w.-]+\.md(#[\w-]+)?\)/);
  });
});
