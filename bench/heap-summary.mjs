// Summarises a .heapsnapshot: live objects by constructor (count, self size, retained size from the dominator tree),
// and for a chosen constructor the chains of retainers that hold its instances.
//   node bench/heap-summary.mjs FILE [--top 40] [--retainers NAME] [--depth 6]
import { readFileSync } from 'node:fs';

const args = process.argv.slice(2);
const file = args[0];
const opt = (name, d) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : d; };
const top = Number(opt('--top', 40));
const wanted = opt('--retainers');
const depth = Number(opt('--depth', 6));

const snap = JSON.parse(readFileSync(file, 'utf8'));
const m = snap.snapshot.meta;
const nf = m.node_fields, ef = m.edge_fields;
const NFL = nf.length, EFL = ef.length;
const nTypes = m.node_types[0], eTypes = m.edge_types[0];
const N_TYPE = nf.indexOf('type'), N_NAME = nf.indexOf('name'), N_SIZE = nf.indexOf('self_size'), N_EC = nf.indexOf('edge_count');
const E_TYPE = ef.indexOf('type'), E_NAME = ef.indexOf('name_or_index'), E_TO = ef.indexOf('to_node');
const nodes = snap.nodes, edges = snap.edges, strings = snap.strings;
const count = nodes.length / NFL;
const firstEdge = new Uint32Array(count + 1);
for (let i = 0, e = 0; i < count; i++) { firstEdge[i] = e; e += nodes[i * NFL + N_EC] * EFL; firstEdge[i + 1] = e; }
const typeOf = (i) => nTypes[nodes[i * NFL + N_TYPE]];
const nameOf = (i) => strings[nodes[i * NFL + N_NAME]];
const label = (i) => {
  const t = typeOf(i);
  if (t === 'object' || t === 'native') return nameOf(i);
  if (t === 'closure') return 'closure';
  if (t === 'string' || t === 'concatenated string' || t === 'sliced string') return 'string';
  if (t === 'code') return 'code';
  if (t === 'hidden' || t === 'object shape') return `(${t}) ${nameOf(i).slice(0, 40)}`;
  return `(${t})`;
};
const weak = eTypes.indexOf('weak'), shortcut = eTypes.indexOf('shortcut');
// Reverse edges, skipping weak ones.
const predCount = new Uint32Array(count + 1);
for (let i = 0; i < count; i++) for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EFL) { const t = edges[e + E_TYPE]; if (t === weak) continue; predCount[edges[e + E_TO] / NFL]++; }
const predStart = new Uint32Array(count + 1);
for (let i = 0; i < count; i++) predStart[i + 1] = predStart[i] + predCount[i];
const preds = new Uint32Array(predStart[count]);
const predEdge = new Uint32Array(predStart[count]);
const fill = predStart.slice(0, count);
for (let i = 0; i < count; i++) for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EFL) { if (edges[e + E_TYPE] === weak) continue; const to = edges[e + E_TO] / NFL; preds[fill[to]] = i; predEdge[fill[to]++] = e; }
// DFS post order from root 0 (non-weak edges), then Cooper-Harvey-Kennedy dominators.
const order = new Int32Array(count).fill(-1); const post = new Uint32Array(count); let pc = 0;
{
  const stack = [0], it = [firstEdge[0]]; const seen = new Uint8Array(count); seen[0] = 1;
  while (stack.length) {
    const n = stack[stack.length - 1]; let e = it[it.length - 1];
    let pushed = false;
    for (; e < firstEdge[n + 1]; e += EFL) {
      if (edges[e + E_TYPE] === weak) continue;
      const to = edges[e + E_TO] / NFL;
      if (!seen[to]) { seen[to] = 1; it[it.length - 1] = e + EFL; stack.push(to); it.push(firstEdge[to]); pushed = true; break; }
    }
    if (!pushed) { stack.pop(); it.pop(); order[n] = pc; post[pc++] = n; }
  }
}
const idom = new Int32Array(count).fill(-1); idom[0] = 0;
const intersect = (a, b) => { while (a !== b) { while (order[a] < order[b]) a = idom[a]; while (order[b] < order[a]) b = idom[b]; } return a; };
for (let changed = true; changed;) {
  changed = false;
  for (let k = pc - 2; k >= 0; k--) {
    const n = post[k]; let nd = -1;
    for (let p = predStart[n]; p < predStart[n + 1]; p++) { const q = preds[p]; if (order[q] < 0 || idom[q] < 0) continue; nd = nd < 0 ? q : intersect(q, nd); }
    if (nd >= 0 && idom[n] !== nd) { idom[n] = nd; changed = true; }
  }
}
const retained = new Float64Array(count);
for (let i = 0; i < count; i++) retained[i] = nodes[i * NFL + N_SIZE];
for (let k = 0; k < pc; k++) { const n = post[k]; if (n !== 0 && idom[n] >= 0) retained[idom[n]] += retained[n]; }
let total = 0; const groups = new Map();
for (let i = 0; i < count; i++) {
  if (order[i] < 0) continue;
  const s = nodes[i * NFL + N_SIZE]; total += s;
  const l = label(i); const g = groups.get(l) ?? { n: 0, self: 0, ret: 0 }; g.n++; g.self += s;
  // Retained of a group: the instances not dominated by another instance of the same group.
  let d = idom[i], inner = false; for (let h = 0; h < 30 && d > 0; h++, d = idom[d]) if (label(d) === l) { inner = true; break; }
  if (!inner) g.ret += retained[i];
  groups.set(l, g);
}
const MiB = (b) => (b / 1048576).toFixed(2);
console.log(`live: ${MiB(total)} MiB in ${pc} nodes`);
console.log('count\tself MiB\tretained MiB\tname');
for (const [l, g] of [...groups].sort((a, b) => b[1].self - a[1].self).slice(0, top)) console.log(`${g.n}\t${MiB(g.self)}\t${MiB(g.ret)}\t${l}`);
console.log('--- by retained');
for (const [l, g] of [...groups].sort((a, b) => b[1].ret - a[1].ret).slice(0, top)) console.log(`${g.n}\t${MiB(g.self)}\t${MiB(g.ret)}\t${l}`);
const props = opt('--props');
if (wanted && props) {
  // The named properties' values (strings) of the instances of `wanted`, grouped.
  const seen = new Map();
  const str = (n) => { const t = typeOf(n); if (t === 'string') return nameOf(n); if (t === 'concatenated string' || t === 'sliced string') { let out = ''; for (let e = firstEdge[n]; e < firstEdge[n + 1]; e += EFL) out += str(edges[e + E_TO] / NFL); return out; } return `<${label(n)}>`; };
  for (let i = 0; i < count; i++) {
    if (order[i] < 0 || label(i) !== wanted) continue;
    const vals = [];
    for (let e = firstEdge[i]; e < firstEdge[i + 1]; e += EFL) if (props.split(',').includes(strings[edges[e + E_NAME]])) vals.push(str(edges[e + E_TO] / NFL).slice(0, 400));
    const k = vals.join(' || '); seen.set(k, (seen.get(k) ?? 0) + 1);
  }
  for (const [k, c] of [...seen].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`${c}\t${k}`);
}
if (wanted) {
  // Retainer paths (first non-weak retainer, skipping internals) for the instances of `wanted`, grouped.
  const paths = new Map();
  for (let i = 0; i < count; i++) {
    if (order[i] < 0 || label(i) !== wanted) continue;
    const parts = []; let n = i;
    for (let d = 0; d < depth; d++) {
      let best = -1, bestE = -1;
      for (let p = predStart[n]; p < predStart[n + 1]; p++) { const q = preds[p]; if (edges[predEdge[p] + E_TYPE] === shortcut) continue; if (best < 0 || order[q] > order[best]) { best = q; bestE = predEdge[p]; } }
      if (best <= 0) break;
      const et = eTypes[edges[bestE + E_TYPE]]; const en = et === 'element' || et === 'hidden' ? `[${edges[bestE + E_NAME]}]` : strings[edges[bestE + E_NAME]];
      parts.push(`${en} <- ${label(best)}`); n = best;
    }
    const key = parts.join(' | '); paths.set(key, (paths.get(key) ?? 0) + 1);
  }
  for (const [p, c] of [...paths].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${c}\t${p}`);
}
