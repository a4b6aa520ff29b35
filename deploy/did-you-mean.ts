// "did you mean …" for a key a settings file does not take: the known key nearest to it by edit
// distance (a typo: `namespace` for `namespaces`), or failing that the same name at another level
// (`image` at the top for `bridge.image`). Settings are few, so a plain dynamic programme will do.

/** Levenshtein distance: insertions, deletions and substitutions, each 1. */
export function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/**
 * The key `unknown` most likely meant, as a dotted path (`namespaces`, `bridge.image`), or
 * undefined when none is near. `where`: the dotted path of the object it was found in ("" at the
 * top, `operators[]` in a list's item); `known`: every key, as deploySettingKeys() spells them.
 */
export function nearestKey(unknown: string, where: string, known: readonly string[]): string | undefined {
  const prefix = where === "" ? "" : `${where}.`;
  const here = [
    ...new Set(
      known
        .filter((k) => k.startsWith(prefix))
        .map((k) => k.slice(prefix.length).split(/[.[]/)[0]!)
        .filter(Boolean),
    ),
  ];
  const lower = unknown.toLowerCase();
  // A third of the name, at least one edit: `namespace` → `namespaces`, never `out` → `gcp`.
  const bound = Math.max(1, Math.floor(unknown.length / 3));
  const scored = here.map((k) => ({ k, d: editDistance(lower, k.toLowerCase()) })).sort((x, y) => x.d - y.d || x.k.localeCompare(y.k));
  const best = scored[0];
  if (best !== undefined && best.d <= bound) return `${prefix}${best.k}`;
  return known.find(
    (k) =>
      k
        .split(/\.|\[\]\./)
        .at(-1)
        ?.toLowerCase() === lower,
  );
}
