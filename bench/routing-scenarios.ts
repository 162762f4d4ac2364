/**
 * The cost of routing (issue 21): AMQP→AMQP with header IDs, the same messages through the same bridge with and
 * without a three-term JMS filter and header rules (rename, remove, set). Every message carries the headers the filter
 * reads and the filter selects all of them, so both rows forward the same messages and only the evaluation and the
 * rules differ; the ratio column compares the two. Each has a twin with duplicate detection off (the '× dedupe off'
 * column).
 */
import { type Scenario, deleteAmqpQueues, prefillAmqpWith, runBridge, uniq, waitAmqpCount } from './harness.js';
import type { RunResult } from './window.js';
import { WARMUP } from './window.js';

const PLAIN = 'bridge, header IDs, routing headers';
const PLAIN_OFF = 'bridge, routing headers, dedupe off';
const RULES_OFF = 'bridge, filter + header rules, dedupe off';

/** Headers every message carries: what the filter reads (all selected) and what the rules touch. */
function headersOf(queue: string): (i: number) => Record<string, unknown> {
  return (i) => ({ _AMQ_DUPL_ID: `${queue}-${i}`, region: 'eu', amount: 100 + (i % 900), internal: 'x', tenant: `t${i % 7}` });
}

const RULES = [
  `filter: "region = 'eu' AND amount > 99 AND JMSPriority >= 0"`,
  'rename-headers: { tenant: x-tenant }',
  'remove-headers: [internal]',
  'set-headers: { env: bench }',
];

function routedBridge(bridgeYaml: string[], dedupe = true) {
  return async (n: number): Promise<RunResult> => {
    const src = uniq('route-src');
    const dst = uniq('route-dst');
    await prefillAmqpWith(src, WARMUP + n, headersOf(src), dst);
    try {
      return await runBridge(
        { sourceConnection: 'rabbit', sourceQueue: src, targetConnection: 'rabbit', targetQueue: dst, dedupe, bridgeYaml, waitDone: (w) => waitAmqpCount(dst, w) },
        n,
      );
    } finally {
      await deleteAmqpQueues(src, dst);
    }
  };
}

export const routingScenarios: Scenario[] = [
  { group: 'routing', name: PLAIN, detectionOff: PLAIN_OFF, run: routedBridge([]) },
  { group: 'routing', name: 'bridge, header IDs, filter + header rules', baseline: PLAIN, detectionOff: RULES_OFF, run: routedBridge(RULES) },
  { group: 'routing', name: PLAIN_OFF, run: routedBridge([], false) },
  { group: 'routing', name: RULES_OFF, baseline: PLAIN_OFF, run: routedBridge(RULES, false) },
];
