/** "Did you mean …?" for misspelt keys and names. */

/**
 * Edit distance between two strings: insert, delete or substitute one character, or swap two adjacent ones
 * (optimal string alignment), since a swap ("stmop") is as common a typo as a missing letter.
 */
export function levenshtein(a: string, b: string): number {
  if (a === b) return 0;
  const rows: number[][] = [Array.from({ length: b.length + 1 }, (_, j) => j)];
  for (let i = 1; i <= a.length; i += 1) {
    const row = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const up = rows[i - 1] ?? [];
      let d = Math.min((up[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (up[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d = Math.min(d, (rows[i - 2]?.[j - 2] ?? 0) + 1);
      }
      row[j] = d;
    }
    rows.push(row);
  }
  return rows[a.length]?.[b.length] ?? 0;
}

// camelCase and snake_case spellings of a kebab-case key are the commonest slip; compare them as equal.
function fold(s: string): string {
  return s.toLowerCase().replace(/[-_.\s]/g, '');
}

/**
 * The candidate closest to `input`, when it is close enough to be a likely typo (about one edit per three
 * characters), else undefined.
 */
export function didYouMean(input: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    if (candidate === input) continue;
    const d = fold(candidate) === fold(input) ? 0 : levenshtein(input.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  const limit = Math.max(1, Math.floor(input.length / 3));
  return bestDistance <= limit ? best : undefined;
}

/** " (did you mean 'x'?)" or "". */
export function suggestion(input: string, candidates: Iterable<string>): string {
  const s = didYouMean(input, candidates);
  return s === undefined ? '' : ` (did you mean '${s}'?)`;
}
