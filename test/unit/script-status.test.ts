/**
 * The cache scripts' replies (src/cache/script-status.ts): one table, one decoder. The table must say what the scripts'
 * own header comments say, and the decoder refuses whatever a script does not return.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SCRIPT_KEYS, type ScriptName } from '../../src/cache/script-loader.js';
import { SCRIPT_REPLIES, ScriptReplyError, ScriptStatus, decodeReserveReply, decodeScriptReply, isEpochChanged, isOldLayout } from '../../src/cache/script-status.js';

const DIR = new URL('../../src/cache/scripts/', import.meta.url);

/** The status codes a script's header comment lists (`{N …}` in the comment before the code). */
function documentedCodes(file: string): number[] {
  const header = readFileSync(new URL(file, DIR), 'utf8').split(']]')[0]!;
  return [...new Set([...header.matchAll(/\{(\d+)\b/g)].map((m) => Number(m[1])))].sort();
}

function fileOf(name: ScriptName): string {
  const kebab = name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  return `${kebab}-${SCRIPT_KEYS[name]}.lua`;
}

describe('the scripts\' status table', () => {
  it.each(Object.keys(SCRIPT_KEYS) as ScriptName[])('%s: the table lists what the script\'s header documents', (name) => {
    expect(readdirSync(DIR)).toContain(fileOf(name));
    const table = [...SCRIPT_REPLIES[name]] as number[];
    const expected = [...new Set([...table, ScriptStatus.BadArgument])].sort();
    expect(documentedCodes(fileOf(name))).toEqual(expected);
  });

  it('has no member no script returns', () => {
    const used = new Set<number>([...Object.values(SCRIPT_REPLIES).flat(), ScriptStatus.EpochChanged, ScriptStatus.OldLayout, ScriptStatus.BadArgument]);
    const members = Object.values(ScriptStatus).filter((v): v is number => typeof v === 'number');
    expect(members.filter((m) => !used.has(m))).toEqual([]);
  });
});

describe('decodeScriptReply', () => {
  it('decodes each status a script returns, typed', () => {
    expect(decodeScriptReply('release', [4])).toEqual({ status: ScriptStatus.NotOwner });
    expect(decodeScriptReply('stampClaim', [3, '1700', 'procA'])).toEqual({ status: ScriptStatus.Busy, since: 1700, holders: ['procA'] });
    expect(decodeScriptReply('stampClaim', [5, Buffer.from('id-1'), 1, 0])).toEqual({ status: ScriptStatus.Claimed, id: 'id-1', possibleDuplicate: true, done: false });
    expect(decodeScriptReply('epoch', [0, 'g:0', 'run', 5, 1])).toEqual({ status: ScriptStatus.Ok, fields: ['g:0', 'run', 5, 1] });
  });

  it('refuses a status the script does not return, a malformed reply, and says a bad argument in its words', () => {
    expect(() => decodeScriptReply('commit', [4])).toThrow(ScriptReplyError);
    expect(() => decodeScriptReply('commit', 'OK')).toThrow(/not a status array/);
    expect(() => decodeScriptReply('stampClaim', [3])).toThrow(/busy without the clock/);
    expect(() => decodeScriptReply('commit', [9, 'bad numbers'])).toThrow(/bad argument: bad numbers/);
    expect(() => decodeReserveReply([9, 'no id'], 1)).toThrow(/bad argument: no id/);
    expect(() => decodeReserveReply('RX', 2)).toThrow(/unknown outcome 'X'/);
  });

  it('tells the epoch guard\'s answer apart from a script\'s own', () => {
    expect(isEpochChanged([8, 'g:1|run'])).toBe(true);
    expect(isOldLayout([10])).toBe(true);
    expect(isOldLayout([8, 'g:1|run'])).toBe(false);
    expect(isEpochChanged([0])).toBe(false);
    expect(isEpochChanged('RRD')).toBe(false);
  });
});
