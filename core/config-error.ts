// A setting is wrong (bridge, functions, CLI): reported as its one line naming the setting,
// never with a stack trace, which says nothing about a wrong setting.
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
    this.stack = `ConfigError: ${message}`;
  }
}
