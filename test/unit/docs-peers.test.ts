/**
 * Every peer the docs name is one a test talks to, or the sentence naming it says "not tested": the docs are README.md,
 * docs/*.md (prose and tables, not code blocks) and the comments of bridges.yaml and examples/*.yaml; the peers
 * and the tests that talk to them are the one list of test/support/peers.ts.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withoutFences } from '../support/markdown.js';
import { PEERS } from '../support/peers.js';

const root = resolve(import.meta.dirname, '../..');
const NOT_TESTED = /not tested/i;

/** Units of prose a claim lives in: sentences of paragraphs and list items, and table rows whole. */
function sentences(prose: string): string[] {
  const units: string[] = [];
  let block: string[] = [];
  const flush = () => {
    if (block.length > 0) units.push(...block.join(' ').split(/(?<=[.!?])\s+(?=[A-Z`([*])/));
    block = [];
  };
  for (const line of prose.split('\n')) {
    const t = line.trim();
    if (t === '') flush();
    else if (t.startsWith('|')) {
      flush();
      units.push(t);
    } else {
      if (/^([-*+]|\d+\.)\s/.test(t) || t.startsWith('#')) flush();
      block.push(t);
    }
  }
  flush();
  return units;
}

/**
 * The comment text of a YAML file: consecutive whole-line comments as one block, a comment after a value as a block of
 * its own (a `#` inside a quoted value is rare here).
 */
function yamlComments(text: string): string {
  return text
    .split('\n')
    .map((line) => {
      const comment = /(?:^|\s)#\s?(.*)$/.exec(line)?.[1];
      if (comment === undefined) return '';
      return line.trimStart().startsWith('#') ? comment : `\n${comment}\n`;
    })
    .join('\n');
}

/** The sentences of `text` that name an untested peer without saying "not tested". */
function unmarked(text: string): { peer: string; sentence: string }[] {
  const found: { peer: string; sentence: string }[] = [];
  for (const sentence of sentences(text)) {
    for (const peer of PEERS) {
      if (peer.testedBy.length === 0 && peer.pattern.test(sentence) && !NOT_TESTED.test(sentence)) found.push({ peer: peer.name, sentence });
    }
  }
  return found;
}

const docs = [
  'README.md',
  ...readdirSync(resolve(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`),
  'bridges.yaml',
  ...readdirSync(resolve(root, 'examples')).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => `examples/${f}`),
];

function prose(file: string): string {
  const text = readFileSync(resolve(root, file), 'utf8');
  return file.endsWith('.md') ? withoutFences(text) : yamlComments(text);
}

describe('peers named in the docs', () => {
  it('finds an untested peer named without "not tested", and accepts one named with it (the check itself)', () => {
    expect(unmarked('Bridges RabbitMQ and Artemis.\nAlso fine.')).toEqual([{ peer: 'ActiveMQ Artemis', sentence: 'Bridges RabbitMQ and Artemis.' }]);
    expect(unmarked('Bridges RabbitMQ and ActiveMQ Artemis (not tested:\nit differs). Kafka too.')).toEqual([{ peer: 'Apache Kafka', sentence: 'Kafka too.' }]);
    expect(unmarked('| ActiveMQ Classic | RabbitMQ | Artemis: not tested |')).toEqual([]);
    expect(unmarked('ActiveMQ Classic and RabbitMQ, both tested.')).toEqual([]);
  });

  it.each(docs)('%s names only tested peers, or says "not tested" beside the others', (file) => {
    expect(unmarked(prose(file))).toEqual([]);
  });

  it('the peer list names existing test files for the tested ones', () => {
    for (const peer of PEERS) for (const file of peer.testedBy) expect(existsSync(resolve(root, file)), `${peer.name}: ${file}`).toBe(true);
    expect(PEERS.filter((p) => p.testedBy.length > 0).map((p) => p.name)).toEqual(expect.arrayContaining(['RabbitMQ', 'ActiveMQ Classic', 'Redis']));
  });
});
