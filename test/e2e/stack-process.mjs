// `npm start`'s stack (scripts/stack.mjs) in a process of its own, for tests that kill it with
// SIGKILL (kill -9) as a crash would: no dispose, no flush, workerd gone mid-request. The options come
// as JSON in KEYWAY_STACK_OPTIONS; "READY <url>" on stdout says it serves. Started as a process group
// leader (test/e2e/kill-9.test.ts), so one kill of the group takes workerd with it.
import { startStack } from "../../scripts/stack.mjs";

const options = JSON.parse(process.env.KEYWAY_STACK_OPTIONS ?? "{}");
const stack = await startStack(options);
process.stdout.write(`READY ${stack.url}\n`);
// Up until killed.
setInterval(() => undefined, 1 << 30);
