import { describe, expect, it } from "vitest";
import { base64url, base64urlDecode } from "../../durable-objects/contract/crypto";

/** Every seal, id and MAC a login reads passes through the runtime's base64 decoder (crypto.ts). */
describe("base64url decoding", () => {
  const bytes = Uint8Array.from({ length: 257 }, (_, i) => (i * 37) & 255);
  it("reads what base64url writes, padded or not, at every length mod 3", () => {
    for (const n of [0, 1, 2, 3, 31, 32, 33, 257]) {
      const slice = bytes.slice(0, n);
      const encoded = base64url(slice);
      expect(base64urlDecode(encoded)).toEqual(slice);
      expect(base64urlDecode(encoded + "===".slice((encoded.length + 3) % 4))).toEqual(slice);
    }
  });
  it("takes the standard alphabet too, as atob did", () => {
    expect(base64urlDecode("+/8")).toEqual(Uint8Array.from([251, 255]));
    expect(base64urlDecode("-_8")).toEqual(Uint8Array.from([251, 255]));
    expect(base64urlDecode("+_8")).toEqual(Uint8Array.from([251, 255]));
  });
  it("refuses what is not base64", () => {
    for (const bad of ["a", "ab!c", "abc.", "ab\u0000c", "é"]) expect(() => base64urlDecode(bad), bad).toThrow();
  });
});
