/**
 * The layers of src/, and the rules that keep imports pointing one way (`npm run lint:deps`, run by .ci/run).
 *
 *   shared ← routing ← config ← core ← adapters (cache, endpoints, mapping) ← service ← cli
 *
 * Each layer imports only from layers to its left (and from itself). shared holds what every layer needs (errors,
 * logging, small utilities); routing holds message selectors (config compiles them while loading bridges.yaml, core
 * applies them; they read a message by its shape, not through core's types); config turns bridges.yaml into typed
 * settings; core holds the ports, the message model, the pipeline and the supervisor; the adapters implement core's
 * ports; service wires them together; cli starts it.
 * src/ never imports test/ or bench/ code.
 */
const layers = ['shared', 'routing', 'config', 'core', 'adapters', 'service', 'cli'];
const paths = {
  shared: '^src/shared/',
  routing: '^src/routing/',
  config: '^src/config/',
  core: '^src/core/',
  adapters: '^src/(cache|endpoints|mapping)/',
  service: '^src/service/',
  cli: '^src/cli\\.ts$',
};

/** One rule per layer: it may not import any layer to its right. */
const upward = layers.slice(0, -1).map((layer, i) => ({
  name: `no-import-up-from-${layer}`,
  comment: `${layer} sits below ${layers.slice(i + 1).join(', ')}: what it needs from there belongs lower (see .dependency-cruiser.cjs)`,
  severity: 'error',
  from: { path: paths[layer] },
  to: { path: layers.slice(i + 1).map((l) => paths[l]).join('|') },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Import cycles make start-up order and mocking fragile; break them by moving the shared piece lower.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    ...upward,
    {
      name: 'no-test-or-bench-from-src',
      comment: 'Shipped code never depends on tests or benchmarks.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'every-src-file-in-a-layer',
      comment: 'A new top-level folder or file under src/ needs a place in the layers above.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(shared|routing|config|core|cache|endpoints|mapping|service)/|^src/cli\\.ts$' },
      to: {},
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
