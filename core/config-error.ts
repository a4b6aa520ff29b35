// Bad input as one line, in one place: a wrong setting (bridge, functions, CLI, deploy settings)
// and a value that fails its zod schema (a spec, a reconcile result, a key event). A stack trace
// says nothing about a wrong setting, and a zod error's own text spans lines (z.prettifyError),
// which a status condition, an Event or a log line cannot hold.
import type { z } from "zod";

/** A setting is wrong: reported as its one line naming the setting, never with a stack trace. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
    this.stack = `ConfigError: ${message}`;
  }
}

/** How a failed parse is named: where its paths start, and what its root is called. */
export interface IssueNaming {
  /** Prefixed to every path ("spec" → "spec.replicas"): the value parsed was that field. */
  under?: string;
  /** Names an issue about the whole value (empty path); without it, the message stands alone. */
  root?: string;
  /** How many leading path segments the caller names itself (a record's key: `cluster "a": …`). */
  named?: number;
  /** Only the first issue: a setting's line names one setting, and the rest often follow from it. */
  first?: boolean;
}

/**
 * A failed parse as one line: each issue as `<path>: <message>` ("a.b.0: Too small: …"), joined
 * by "; ". A record's refused key reports its own reason (the key's pattern), which zod nests.
 */
export function zodLine(error: z.ZodError, naming: IssueNaming = {}): string {
  const issues = naming.first ? error.issues.slice(0, 1) : error.issues;
  if (issues.length === 0) return "invalid";
  return issues
    .map((issue) => {
      const message = issue.code === "invalid_key" ? (issue.issues[0]?.message ?? issue.message) : issue.message;
      const where = [...(naming.under ? [naming.under] : []), ...issue.path.slice(naming.named ?? 0).map(String)].join(".") || naming.root;
      return where ? `${where}: ${message}` : message;
    })
    .join("; ");
}

/**
 * Settings parsed by their schema, or a ConfigError naming the first bad one:
 * `<lead><setting>: <message>` (lead "invalid setting " → "invalid setting CRDFN_X: …").
 */
export function parseSettings<S extends z.ZodType>(schema: S, input: unknown, lead: string, root = "(top)"): z.output<S> {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  throw new ConfigError(`${lead}${zodLine(parsed.error, { first: true, root })}`);
}
