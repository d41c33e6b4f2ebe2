import Foundation
import Testing
import _WebAuthnEncoding

/// `webauthn inspect` on hostile map keys (red team, round 25).
extension CLITests {
    /// An attestation object whose statement is `statement`, with an authenticator data of 37 bytes.
    static func attestationObject(statement: [CBORPair]) -> String {
        let authData = [UInt8](repeating: 0, count: 32) + [0x01, 0, 0, 0, 1]
        return Base64URL.encode(
            CBOREncoder.encode(
                .map([CBORPair(.text("fmt"), .text("none")), CBORPair(.text("attStmt"), .map(statement)), CBORPair(.text("authData"), .bytes(authData))])))
    }

    /// Keys written as JSON printed alike: `[1]` and `[1.0]`, `h'00'` and `"AA"`, `null` and
    /// `undefined`. Each key that is neither text nor an integer is now named in CBOR diagnostic
    /// notation, and each pair of the array form names the key's type.
    @Test("inspect names every map key apart from every other")
    func inspectKeysApart() async throws {
        let keys: [CBOR] = [
            .unsigned(1), .text("1"), .array([.unsigned(1)]), .array([.float(1)]), .bytes([0]), .text("AA"), .array([.null]), .array([.undefined]),
            .array([.bytes([0])]), .array([.text("AA")]), .text("[1]"),
        ]
        let run = try await Self.run(
            ["inspect", "-"], stdin: Self.attestationObject(statement: keys.enumerated().map { CBORPair($0.element, .unsigned(UInt64($0.offset))) }))
        let pairs = try #require(run.json?["attStmt"]?.arrayValue, "\(run.stdout) \(run.stderr)")
        // As encoded: in CBOR's canonical order.
        let named = Dictionary(
            uniqueKeysWithValues: pairs.map { ("\($0["type"]?.stringValue ?? "?") \($0["key"]?.stringValue ?? "?")", $0["value"]?.intValue) })
        let expected = [
            "integer 1", "text 1", "array [1]", "array [1.0]", "bytes h'00'", "text AA", "array [null]", "array [undefined]", "array [h'00']",
            #"array ["AA"]"#, "text [1]",
        ]
        #expect(pairs.count == keys.count && named == Dictionary(uniqueKeysWithValues: expected.enumerated().map { ($0.element, $0.offset) }), "\(run.stdout)")
    }

    /// Keys nested in keys, each map forced into the array form by a collision: every key was
    /// rendered twice, once for its name and once for the array, so the work doubled at each
    /// level (26 s for 36 KB at depth 13; some ten minutes for 200 KB). It is now linear.
    @Test("inspect renders keys nested in keys in linear time", .timeLimit(.minutes(1)))
    func inspectNestedKeysLinear() async throws {
        // Backslashes, which JSON escapes, in an array: the red team's chain, which took some ten
        // minutes at this depth before.
        var key = CBOR.array([.text(String(repeating: "\\", count: 150_000))])
        for _ in 0..<12 { key = .map([CBORPair(key, .unsigned(0)), CBORPair(.unsigned(1), .unsigned(1)), CBORPair(.text("1"), .unsigned(2))]) }
        let run = try await Self.run(["inspect", "-"], stdin: Self.attestationObject(statement: [CBORPair(key, .unsigned(1))]))
        #expect(run.status == 0, "\(run.stderr)")
        // Too deep for the tests' JSON reader: the statement's one key is the chain, by its diagnostic notation.
        #expect(run.stdout.contains(#"{"fmt":"none","attStmt":{"{1: 1, \"1\": 2, {1: 1, "#), "\(run.stdout.prefix(300))")
    }
}
