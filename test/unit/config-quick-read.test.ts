/**
 * The configuration's good path (src/config/quick-read.ts: the file cut into sections and bridges, each read alone
 * and remembered by its text) against the whole file read with positions (parseLocated): the same Config or the same
 * located errors, for every configuration file in the repository and for the layouts that could read differently
 * when cut apart.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig, parseLocated } from '../../src/config/load.js';
import { readQuickly } from '../../src/config/quick-read.js';

const root = resolve(import.meta.dirname, '../..');
const env = { AMQP_URL: 'amqp://u:p@h:5672', REDIS_URL: 'redis://r:6379', STOMP_URL: 'stomp://s:61613', PREFETCH: '7', Q: 'from-env' };

/** The outcome as data: a compiled filter's functions by their text (two compilations are two closures). */
function outcome(read: () => unknown): unknown {
  try {
    return { config: JSON.parse(JSON.stringify(read(), (_, v: unknown) => (typeof v === 'function' ? `function ${v.toString()}` : v))) as unknown };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

function sameBothWays(text: string, file = '/x/bridges.yaml'): void {
  expect(outcome(() => parseConfig(text, file, env))).toEqual(outcome(() => parseLocated(text, file, env)));
  // Again, with every piece remembered from the first read.
  expect(outcome(() => parseConfig(text, file, env))).toEqual(outcome(() => parseLocated(text, file, env)));
}

const head = `connections:
  rabbit: { type: amqp, url: "\${AMQP_URL}" }
bridges:
`;
const item = (i: number, extra = '') => `  - name: b${i}\n    source: { connection: rabbit, queue: "s${i}" }\n    target: { connection: rabbit, queue: t }\n${extra}`;

const layouts: Record<string, string> = {
  plain: head + item(1) + item(2),
  'items at column 0': head + '- name: a\n  source: { connection: rabbit, queue: s }\n  target: { connection: rabbit, queue: t }\n',
  'comments at column 0 between items': head + item(1) + '# a comment\n\n' + item(2),
  'CRLF line ends': (head + item(1) + item(2)).replaceAll('\n', '\r\n'),
  'a block scalar': head + item(1, '    filter: >\n      JMSPriority > 4\n\n') + item(2),
  'a block scalar keeping its line ends': head + item(1, '    filter: |+\n      JMSPriority > 4\n\n') + item(2),
  'a multi-line quoted scalar': head + item(1, '    filter: "JMSPriority\n      > 4"\n') + item(2),
  'a quoted scalar cut at an item': head + item(1, '    filter: "JMSPriority\n  - > 4"\n') + item(2),
  'a flow mapping cut at an item': head + '  - { name: a, source: { connection: rabbit, queue: s },\n  - target: { connection: rabbit, queue: t } }\n',
  'a flow sequence of bridges': head.replace('bridges:\n', 'bridges: [\n') + '  { name: a, source: { connection: rabbit, queue: s }, target: { connection: rabbit, queue: t } } ]\n',
  'an anchor in one bridge, an alias in another': head + item(1, '    dead-letter: &dl { connection: rabbit, queue: dl }\n') + item(2, '    dead-letter: *dl\n'),
  'a merge of defaults': 'shared: &s { prefetch: 9 }\n'.replace('shared', 'x-shared') + head + item(1, '    <<: *s\n'),
  'an anchor and its alias in one bridge': head + '  - &n { name: a, source: { connection: rabbit, queue: s }, target: { connection: rabbit, queue: t } }\n',
  'a key given twice in a bridge': head + item(1, '    prefetch: 1\n    prefetch: 2\n'),
  'a top-level key given twice': head + item(1) + 'connections:\n  other: { type: amqp, url: "amqp://h" }\n',
  'a document marker': '---\n' + head + item(1),
  'two documents': head + item(1) + '---\n' + head + item(2),
  'a variable and a default': head + item(1, '    prefetch: ${PREFETCH}\n    max-delivery-attempts: ${UNSET:-3}\n'),
  'a quoted variable': head + item(1, '    prefetch: "${PREFETCH}"\n'),
  'a missing variable': head + item(1, '    prefetch: ${NOT_SET}\n'),
  'a template and an escaped one': head + '  - name: a\n    source: { connection: rabbit, queue: s }\n    target: { connection: rabbit, queue: "t.${header.region}.$${x}" }\n',
  'an unknown key': head + item(1, '    prefetchh: 3\n'),
  'a duplicate bridge name': head + item(1) + item(1),
  'a key with no value': head + item(1) + 'id-cache:\n# all commented\n',
  'metrics-port': 'metrics-port: 9000\n' + head + item(1),
  'a tab at a line start': head + item(1) + '\t\n',
  'a top level that is a sequence': '- a\n- b\n',
  'an empty file': '',
  'only comments': '# nothing\n',
  'unterminated quote at the end': head + item(1, '    filter: "x\n'),
  'a key line with no space after the colon': head + item(1) + 'log-level:debug\n',
  'a quoted top-level key': '"log-level": debug\n' + head + item(1),
  'a bridges line with a comment': head.replace('bridges:', 'bridges:   # the list') + item(1) + item(2),
  'more indented items after a less indented one': head + item(1) + '      - name: odd\n',
};

describe('config: the good path reads as the whole file does', () => {
  for (const [name, text] of Object.entries(layouts)) it(name, () => sameBothWays(text));

  const files = [
    ...readdirSync(join(root, 'test/fixtures/config')).map((f) => join(root, 'test/fixtures/config', f)),
    ...readdirSync(join(root, 'examples')).filter((f) => f.endsWith('.yaml')).map((f) => join(root, 'examples', f)),
  ];
  for (const file of files) it(file.slice(root.length + 1), () => sameBothWays(readFileSync(file, 'utf8'), file));

  it('takes the good path for a plain file, and gives up where cutting could change the reading', () => {
    expect(readQuickly(layouts.plain!, env)).toBeDefined();
    expect(readQuickly(layouts['CRLF line ends']!, env)).toBeDefined();
    expect(readQuickly(layouts['items at column 0']!, env)).toBeDefined();
    for (const bail of ['a quoted scalar cut at an item', 'a flow mapping cut at an item', 'an anchor in one bridge, an alias in another', 'a top-level key given twice', 'a document marker', 'a missing variable'])
      expect(readQuickly(layouts[bail]!, env), bail).toBeUndefined();
  });

  it('a remembered piece is not changed by what the caller does with the data', () => {
    const first = parseConfig(layouts.plain!, '/x/bridges.yaml', env);
    (first.bridges[0] as { name: string }).name = 'changed';
    (first.bridges[0]!.source as { queue?: string }).queue = 'changed';
    expect(parseConfig(layouts.plain!, '/x/bridges.yaml', env)).toEqual(parseLocated(layouts.plain!, '/x/bridges.yaml', env));
  });

  it('a reload with one bridge changed reads the change, and the environment of its own read', () => {
    const many = head + Array.from({ length: 50 }, (_, i) => item(i)).join('');
    parseConfig(many, '/x/bridges.yaml', env);
    const changed = many.replace('queue: "s17"', 'queue: "${Q}"');
    const config = parseConfig(changed, '/x/bridges.yaml', env);
    expect(config).toEqual(parseLocated(changed, '/x/bridges.yaml', env));
    expect(config.bridges[17]!.source).toMatchObject({ queue: 'from-env' });
    expect(parseConfig(changed, '/x/bridges.yaml', { ...env, Q: 'other' }).bridges[17]!.source).toMatchObject({ queue: 'other' });
  });
});
