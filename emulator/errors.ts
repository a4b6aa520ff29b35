/**
 * A problem a person can fix (a missing tool, a bad setting). Entry points print only its
 * message, one line, never a stack trace.
 */
export class SetupError extends Error {
  override name = "SetupError";
}
