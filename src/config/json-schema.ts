/**
 * bridges.schema.json, generated from the zod schema so that editors (yaml-language-server) check and complete
 * bridges.yaml with the same rules, defaults and descriptions as the loader. It describes the file as written,
 * before `${VAR}` substitution; cross-field rules (connection references, queue xor exchange) are checked only by
 * `broker-bridge validate`.
 *
 * Regenerate the committed copy with `node --import tsx src/config/json-schema.ts` or
 * `broker-bridge schema --out bridges.schema.json`.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { z } from 'zod';
import { configFileSchema } from './schema.js';

/** Where the committed copy lives: the repository root (two levels up from src/config or dist/config). */
export const DEFAULT_SCHEMA_PATH = fileURLToPath(new URL('../../bridges.schema.json', import.meta.url));

export function buildJsonSchema(): Record<string, unknown> {
  // io 'input': the file as the operator writes it, where keys with defaults are optional.
  return z.toJSONSchema(configFileSchema, {
    io: 'input',
    target: 'draft-2020-12',
    override: ({ jsonSchema }) => {
      // z.int() bounds every integer by the safe-integer range; as a schema that is only noise.
      if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
      if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
    },
  });
}

/** The JSON text as committed: two-space indent, trailing newline. */
export function renderJsonSchema(): string {
  return `${JSON.stringify(buildJsonSchema(), null, 2)}\n`;
}

export function writeJsonSchema(path: string = DEFAULT_SCHEMA_PATH): string {
  writeFileSync(path, renderJsonSchema());
  return path;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.stdout.write(`wrote ${writeJsonSchema(process.argv[2])}\n`);
}
