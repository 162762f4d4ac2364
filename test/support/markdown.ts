/** Reading README.md and docs/*.md in tests: what is prose and what is code. Imports nothing (unit tests use it). */

/** The text with fenced code blocks blanked out, every character but newlines a space (so offsets still hold). */
export function withoutFences(text: string): string {
  let fence: string | undefined;
  return text
    .split('\n')
    .map((line) => {
      const marker = /^\s*(`{3,}|~{3,})/.exec(line)?.[1];
      if (fence === undefined) {
        if (marker === undefined) return line;
        fence = marker;
      } else if (marker !== undefined && marker[0] === fence[0] && marker.length >= fence.length && line.trim() === marker) {
        fence = undefined;
      }
      return ' '.repeat(line.length);
    })
    .join('\n');
}
