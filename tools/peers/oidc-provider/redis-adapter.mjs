// node-oidc-provider's storage in Redis, as its users deploy it (PEER=oidc-provider-redis in
// tools/bench.mjs): the adapter interface of node-oidc-provider's docs (docs/README.md#adapter),
// written after the shape of its example Redis adapter. Each model instance is one key with its
// expiry; a consumable one (authorization and device codes, refresh tokens) is a hash whose `consumed`
// field marks it spent; a grant's tokens are listed under `grant:<id>` so a revoke finds them.
import Redis from "ioredis";

const grantable = new Set([
  "AccessToken",
  "AuthorizationCode",
  "RefreshToken",
  "DeviceCode",
  "BackchannelAuthenticationRequest",
]);
const consumable = new Set(["AuthorizationCode", "RefreshToken", "DeviceCode", "BackchannelAuthenticationRequest"]);

/** @param {string} url */
export function redisAdapter(url) {
  const client = new Redis(url, { keyPrefix: "oidc:", enableAutoPipelining: true });
  return class RedisAdapter {
    /** @param {string} name */
    constructor(name) {
      this.name = name;
    }

    /** @param {string} id */
    key(id) {
      return `${this.name}:${id}`;
    }

    /** @param {string} id @param {Record<string, unknown>} payload @param {number} [expiresIn] */
    async upsert(id, payload, expiresIn) {
      const key = this.key(id);
      const multi = client.multi();
      if (consumable.has(this.name)) multi.hset(key, { payload: JSON.stringify(payload) });
      else multi.set(key, JSON.stringify(payload));
      if (expiresIn) multi.expire(key, expiresIn);
      if (grantable.has(this.name) && typeof payload.grantId === "string") {
        const grantKey = `grant:${payload.grantId}`;
        multi.rpush(grantKey, key);
        if (expiresIn && expiresIn > (await client.ttl(grantKey))) multi.expire(grantKey, expiresIn);
      }
      if (typeof payload.userCode === "string") {
        multi.set(`userCode:${payload.userCode}`, id);
        if (expiresIn) multi.expire(`userCode:${payload.userCode}`, expiresIn);
      }
      if (typeof payload.uid === "string") {
        multi.set(`uid:${payload.uid}`, id);
        if (expiresIn) multi.expire(`uid:${payload.uid}`, expiresIn);
      }
      await multi.exec();
    }

    /** @param {string} id */
    async find(id) {
      const key = this.key(id);
      if (!consumable.has(this.name)) {
        const data = await client.get(key);
        return data ? JSON.parse(data) : undefined;
      }
      const { payload, ...rest } = await client.hgetall(key);
      return payload ? { ...rest, ...JSON.parse(payload) } : undefined;
    }

    /** @param {string} uid */
    async findByUid(uid) {
      const id = await client.get(`uid:${uid}`);
      return id ? this.find(id) : undefined;
    }

    /** @param {string} userCode */
    async findByUserCode(userCode) {
      const id = await client.get(`userCode:${userCode}`);
      return id ? this.find(id) : undefined;
    }

    /** @param {string} id */
    async destroy(id) {
      await client.del(this.key(id));
    }

    /** @param {string} grantId */
    async revokeByGrantId(grantId) {
      const grantKey = `grant:${grantId}`;
      // The list holds keys as upsert named them (the client adds its prefix to each command's key).
      const keys = await client.lrange(grantKey, 0, -1);
      const multi = client.multi();
      for (const k of keys) multi.del(k);
      multi.del(grantKey);
      await multi.exec();
    }

    /** @param {string} id */
    async consume(id) {
      await client.hset(this.key(id), "consumed", Math.floor(Date.now() / 1000));
    }
  };
}
