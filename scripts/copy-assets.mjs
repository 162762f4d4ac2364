// tsc does not copy non-TypeScript files; the Lua scripts must sit next to the compiled cache module.
import { cpSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const from = join(root, 'src/cache/scripts');
const to = join(root, 'dist/cache/scripts');
mkdirSync(to, { recursive: true });
for (const f of readdirSync(from)) if (f.endsWith('.lua')) cpSync(join(from, f), join(to, f));
