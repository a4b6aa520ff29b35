// Every example operator this repository ships, for CRD generation and the tooling.
import type { Operator } from "../core/operator.ts";
import cronTab from "./crontab/operator.ts";
import greeting from "./greeting/operator.ts";

export const operators: ReadonlyArray<Operator<unknown>> = [greeting, cronTab];
