// Command-line values that commander hands over as text, parsed in one place so that every
// command refuses a bad one in the same one line.
import { SetupError } from "../emulator/errors.ts";

/** `text` as a whole number ≥ 1, or a SetupError naming `flag`. */
export function positiveInteger(flag: string, text: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new SetupError(`${flag} ${text}: must be a whole number ≥ 1`);
  return n;
}
