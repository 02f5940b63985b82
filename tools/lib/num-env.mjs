/**
 * A non-negative number from the environment (the load tools' settings), or `fallback` when unset or
 * empty; anything else stops the tool with the variable's name.
 * @param {string} name @param {number} fallback
 */
export function numEnv(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a non-negative number, got ${raw}`);
  return n;
}
