/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4), for tests that scrape GET /metrics: every
 * line must be a `# HELP`, a `# TYPE`, a comment or a sample `name{label="value",…} value [timestamp]`; anything else
 * throws, naming the line.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** Metric family name → type from `# TYPE`. */
  types: Map<string, string>;
  /** Samples named `name` whose labels include `labels`. */
  find(name: string, labels?: Record<string, string>): Sample[];
  /** The one sample named `name` with `labels`; throws when there is none or more than one. */
  value(name: string, labels?: Record<string, string>): number;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})?\\s+(\\S+)(?:\\s+(-?\\d+))?$`);
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(text: string, line: number): number {
  if (text === '+Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  // Prometheus reads values with Go's ParseFloat, which takes NaN in any case; prom-client writes `Nan` (its default
  // event-loop-lag gauges are NaN when scraped twice within their sampling interval).
  if (text.toLowerCase() === 'nan') return Number.NaN;
  const v = Number(text);
  if (Number.isNaN(v)) throw new Error(`line ${line}: '${text}' is not a sample value`);
  return v;
}

function parseLabels(text: string, line: number): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const m = LABEL.exec(text);
    if (!m) throw new Error(`line ${line}: bad label set {${text}}`);
    labels[m[1]!] = m[2]!.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    if (m[3] === '') break;
  }
  return labels;
}

export function parsePrometheusText(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    const n = i + 1;
    if (line === '') return;
    if (line.startsWith('#')) {
      const m = /^#\s+(HELP|TYPE)\s+(\S+)(?:\s+(.*))?$/.exec(line);
      if (m?.[1] === 'TYPE') {
        if (!TYPES.has(m[3] ?? '')) throw new Error(`line ${n}: unknown metric type '${m[3]}'`);
        types.set(m[2]!, m[3]!);
      }
      return;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`line ${n}: not a sample: ${line}`);
    samples.push({ name: m[1]!, labels: m[2] ? parseLabels(m[2], n) : {}, value: parseValue(m[3]!, n) });
  });
  const find = (name: string, labels: Record<string, string> = {}) =>
    samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return {
    samples,
    types,
    find,
    value(name, labels = {}) {
      const found = find(name, labels);
      if (found.length !== 1) throw new Error(`${found.length} samples of ${name}${JSON.stringify(labels)}`);
      return found[0]!.value;
    },
  };
}
