/**
 * The order a target saw, from numbered messages in arrival order (docs/delivery.md, "Order"): the first copy of each
 * number counts as out of place when a higher number arrived before it; later copies are extras.
 */
export interface OrderOutcome {
  /** Distinct numbers that arrived. */
  distinct: number;
  /** First copies that came after a higher number, unflagged. */
  outOfPlace: number;
  /** The same, flagged possible-duplicate (a copy the bridge could not rule out having sent before). */
  outOfPlaceFlagged: number;
  /** Second and later copies without the flag. */
  unflaggedExtras: number;
}

export function orderOf(arrived: readonly { seq: number; flagged: boolean }[]): OrderOutcome {
  const seen = new Set<number>();
  let max = -1;
  let outOfPlace = 0;
  let outOfPlaceFlagged = 0;
  let unflaggedExtras = 0;
  for (const m of arrived) {
    if (seen.has(m.seq)) {
      if (!m.flagged) unflaggedExtras += 1;
      continue;
    }
    seen.add(m.seq);
    if (m.seq < max) {
      if (m.flagged) outOfPlaceFlagged += 1;
      else outOfPlace += 1;
    }
    max = Math.max(max, m.seq);
  }
  return { distinct: seen.size, outOfPlace, outOfPlaceFlagged, unflaggedExtras };
}
