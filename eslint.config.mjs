// ESLint with typescript-eslint's type-checked rules (`npm run lint`, run by .ci/run; no warning is allowed).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.activemq/', '.redis-local/', 'coverage/', '**/*.cjs', '**/*.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Adapters and fakes implement Promise-returning ports with `async` methods that need no `await`: `async` is
      // what turns a throw into a rejection, which is the ports' contract.
      '@typescript-eslint/require-await': 'off',
      // `_`-prefixed names and rest siblings are how a value is deliberately left out (`const { BCC: _bcc, ...rest }`).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
    },
  },
  {
    // The operator page's script runs in the browser, as plain JavaScript outside the TypeScript project: the
    // recommended rules without type information, and the browser's globals it uses.
    files: ['src/service/page/assets/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'module',
      globals: Object.fromEntries(
        ['window', 'document', 'location', 'fetch', 'sessionStorage', 'setTimeout', 'clearTimeout', 'URLSearchParams', 'Node'].map((g) => [g, 'readonly']),
      ),
    },
  },
);
