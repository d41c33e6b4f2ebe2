import Foundation
import Testing
import WebAuthnTesting
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// Every parser of client bytes, fed its worst case at its size limit, costs
/// per byte at most ``bound`` times what a normal input of the same parser
/// costs, measured in the same test. A ratio, not an absolute time: machines
/// differ, and a super-linear parser (a quadratic duplicate-member check) is
/// hundreds of times off at the limit.
@Suite("Parser cost at the limits", .serialized)
struct ParserCostTests {
    /// The largest accepted ratio of per-byte costs, worst case ÷ normal input.
    static let bound = 50.0

    /// CPU seconds this thread spent in `body`: unlike wall-clock time, it does not
    /// count the time other tests and processes take the processor away.
    static func seconds(_ body: () -> Void) -> Double {
        func now() -> Double {
            var ts = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
            return Double(ts.tv_sec) + Double(ts.tv_nsec) * 1e-9
        }
        let start = now()
        body()
        return now() - start
    }

    /// Seconds per byte of `parse` on `input`: the best of `runs` batches, each long enough to time (≥ 2 ms).
    static func perByte(_ input: [UInt8], runs: Int, _ parse: ([UInt8]) -> Void) -> Double {
        let once = seconds { parse(input) }
        let repetitions = max(1, min(10_000, Int(0.002 / max(once, 1e-7))))
        var best = once
        for _ in 0..<runs {
            best = min(best, seconds { for _ in 0..<repetitions { parse(input) } } / Double(repetitions))
        }
        return best / Double(max(input.count, 1))
    }

    /// Expects `worst` (at most `limit` bytes, and close to it) to cost at most ``bound`` × `normal` per byte.
    /// Normal and worst are measured in alternation, up to five times, and the best ratio counts;
    /// a ratio over ten times the bound (a super-linear parser) stops at once.
    static func expectLinear(_ name: String, normal: [UInt8], worst: [UInt8], limit: Int, _ parse: ([UInt8]) -> Void) {
        #expect(worst.count <= limit && worst.count >= limit * 3 / 4, "\(name): the worst case is \(worst.count) bytes; the limit is \(limit)")
        var ratio = Double.infinity
        for _ in 0..<5 {
            let normalCost = perByte(normal, runs: 3, parse)
            let worstCost = perByte(worst, runs: 2, parse)
            ratio = min(ratio, worstCost / normalCost)
            if ratio <= bound || ratio > 10 * bound { break }
        }
        if ProcessInfo.processInfo.environment["PARSER_COST_VERBOSE"] != nil { print("parser cost \(name): \(String(format: "%.1f", ratio))×") }
        #expect(ratio <= bound, "\(name): \(worst.count) bytes cost \(Int(ratio))× a normal input's per byte")
    }

    /// Fills `limit` bytes with `prefix`, then as many `item(i)` as fit, then `suffix`.
    static func fill(_ limit: Int, prefix: String, separator: String = ",", suffix: String, item: (Int) -> String) -> [UInt8] {
        var out = Array(prefix.utf8)
        var i = 0
        while true {
            let next = Array(((i == 0 ? "" : separator) + item(i)).utf8)
            guard out.count + next.count + suffix.utf8.count <= limit else { break }
            out += next
            i += 1
        }
        return out + Array(suffix.utf8)
    }

    static let authority = try! AttestationAuthority.generate()
    static let registration = try! Harness().register(attestation: .packedFull(authority))

    // MARK: JSON and base64url

    @Test(
        "JSON: many members, many numbers, escapes, deep nesting, long names",
        arguments: [
            "members", "numbers", "escapes", "nesting", "long names",
        ])
    func json(shape: String) {
        let limit = JSONLimits().maxBytes
        let worst: [UInt8]
        switch shape {
        case "members": worst = Self.fill(limit, prefix: "{", suffix: "}") { "\"m\($0)\":0" }
        case "numbers": worst = Self.fill(limit, prefix: "[", suffix: "]") { _ in "0" }
        case "escapes": worst = Self.fill(limit, prefix: "[\"", separator: "", suffix: "\"]") { _ in "\\u00e9" }
        case "nesting": worst = Self.fill(limit, prefix: "[", suffix: "]") { _ in String(repeating: "[", count: 31) + "0" + String(repeating: "]", count: 31) }
        default: worst = Self.fill(limit, prefix: "{", suffix: "}") { "\"\(String(repeating: "n", count: 2000))\($0)\":0" }
        }
        Self.expectLinear("JSON \(shape)", normal: Self.registration.jsonBytes, worst: worst, limit: limit) { _ = try? JSONValue.parse($0) }
    }

    @Test("JSON bodies: a registration response of many client extension results")
    func registrationBody() {
        let limit = JSONLimits().maxBytes
        let body = Self.registration.jsonBytes
        var object = Self.registration.json.objectValue!
        object["clientExtensionResults"] = "@"
        let text = JSONValue.object(object).serialized()
        let placeholder = text.range(of: "\"@\"")!
        let extensions = Self.fill(limit - text.utf8.count, prefix: "{", suffix: "}") { "\"x\($0)\":[]" }
        let worst = Array((text[..<placeholder.lowerBound] + String(decoding: extensions, as: UTF8.self) + text[placeholder.upperBound...]).utf8)
        Self.expectLinear("registration body", normal: body, worst: worst, limit: limit) { _ = try? RegistrationResponse(json: $0) }
    }

    @Test("clientDataJSON: many members")
    func clientData() {
        let limit = CollectedClientData.maxSize
        let worst = Self.fill(limit, prefix: #"{"type":"webauthn.get","challenge":"AAAA","origin":"https://example.com""# + ",", suffix: "}") {
            "\"e\($0)\":null"
        }
        Self.expectLinear("clientDataJSON", normal: Self.registration.clientDataJSON, worst: worst, limit: limit) { _ = try? CollectedClientData(bytes: $0) }
    }

    @Test("base64url: a field at the body limit")
    func base64url() {
        let limit = JSONLimits().maxBytes
        let normal = Array(Base64URL.encode(Self.registration.attestationObject).utf8)
        let worst = Array(Base64URL.encode([UInt8](repeating: 0xa5, count: limit * 3 / 4)).utf8)
        Self.expectLinear("base64url", normal: normal, worst: worst, limit: limit) { bytes in _ = bytes.withUnsafeBufferPointer { Base64URL.decode(utf8: $0) } }
    }

    @Test("JWS (android-safetynet response): a payload of many members")
    func jws() throws {
        let limit = AndroidSafetyNetAttestation.maxResponseSize
        let key = try SigningKey.generate(.es256)
        let normal = try JWSWriter.compact(["nonce": "AAAA", "timestampMs": 1, "ctsProfileMatch": true], key: key, x5c: [Self.authority.root])
        let payload = Self.fill(limit * 3 / 4 - 64, prefix: "{", suffix: "}") { "\"p\($0)\":1" }
        let worst = Array((Base64URL.encode(Array(#"{"alg":"RS256"}"#.utf8)) + "." + Base64URL.encode(payload) + ".AAAA").utf8)
        Self.expectLinear("JWS", normal: normal, worst: worst, limit: limit) { _ = try? JWS(compact: $0) }
    }

    // MARK: CBOR and what is read from it

    static func cborHead(_ major: UInt8, _ n: Int) -> [UInt8] {
        n < 24 ? [major << 5 | UInt8(n)] : n < 256 ? [major << 5 | 24, UInt8(n)] : [major << 5 | 25, UInt8(n >> 8), UInt8(n & 0xff)]
    }

    @Test(
        "CBOR: a map of long distinct keys, a 16-key map of huge keys, many UTF-8 strings, deep nesting",
        arguments: [
            "many keys", "huge keys", "texts", "nesting",
        ])
    func cbor(shape: String) {
        let limit = CBORLimits().maxBytes
        var worst: [UInt8]
        switch shape {
        case "many keys":  // 2040 pairs of 120-byte keys that differ at the end: hashing and comparing
            worst = Self.cborHead(5, 2040)
            for i in 0..<2040 { worst += Self.cborHead(2, 120) + [UInt8](repeating: 0x61, count: 118) + [UInt8(i >> 8), UInt8(i & 0xff)] + [0x00] }
        case "huge keys":  // 16 pairs of 16 000-byte keys that differ in their last byte: the scan compares them all
            worst = Self.cborHead(5, 16)
            for i in 0..<16 { worst += [0x59, 0x3e, 0x80] + [UInt8](repeating: 0x61, count: 15_999) + [UInt8(i)] + [0x00] }
        case "texts":  // 4000 strings of 31 two-byte characters: UTF-8 validation
            worst = [0x99, 0x0f, 0xa0]
            for _ in 0..<4000 { worst += Self.cborHead(3, 62) + Array(String(repeating: "é", count: 31).utf8) }
        default:  // 15 levels of arrays, repeated as items allow, each holding a byte string
            worst = Self.cborHead(4, 255)
            for _ in 0..<255 { worst += [UInt8](repeating: 0x81, count: 14) + [0x59, 0x03, 0xd0] + [UInt8](repeating: 0x62, count: 976) }
        }
        Self.expectLinear("CBOR \(shape)", normal: Self.registration.attestationObject, worst: worst, limit: limit) { _ = try? CBORDecoder.decode($0) }
    }

    @Test("authenticator data: an extensions map of long distinct keys")
    func authenticatorData() {
        let limit = CBORLimits().maxBytes
        let normal = Self.registration.authenticatorData.bytes
        var worst = [UInt8](repeating: 0, count: 32) + [0x81, 0, 0, 0, 1] + Self.cborHead(5, 2040)
        for i in 0..<2040 { worst += Self.cborHead(3, 120) + [UInt8](repeating: 0x61, count: 117) + Array(String(format: "%03x", i).utf8) + [0xf6] }
        Self.expectLinear("authenticator data", normal: normal, worst: worst, limit: limit) { _ = try? AuthenticatorData(bytes: $0) }
    }

    @Test("COSE key: a valid key with 2000 extra labels")
    func coseKey() throws {
        let limit = CBORLimits().maxBytes
        let key = try SigningKey.generate(.es256).coseKey()
        let normal = CBOREncoder.encode(key)
        var pairs = key.mapValue!
        for i in 0..<2000 { pairs.append(CBORPair(CBOR(-100 - i), .bytes([UInt8](repeating: 0x5a, count: 120)))) }
        let worst = CBOREncoder.encode(.map(pairs))
        Self.expectLinear("COSE key", normal: normal, worst: worst, limit: limit) { _ = try? COSEKey(bytes: $0) }
    }

    // MARK: DER, X.509 and TPM structures

    @Test("DER: a TPM subject alternative name of many attributes")
    func der() throws {
        let limit = X509Certificate.maxSize
        let normal = DERWriter.tpmSAN()
        var rdns: [UInt8] = []
        var i = 0
        while rdns.count < limit - 64 {
            rdns += DERWriter.set(DERWriter.sequence(DERWriter.oid("2.23.133.2.\(1 + i % 3)"), DERWriter.utf8("v\(i)")))
            i += 1
        }
        let worst = DERWriter.sequence(DERWriter.tlv(0xA4, DERWriter.tlv(0x30, rdns)))
        #expect(try TPMAttestation.directoryNameAttributes(worst).count == 3)
        Self.expectLinear("DER", normal: normal, worst: worst, limit: limit) { _ = try? TPMAttestation.directoryNameAttributes($0) }
    }

    @Test("X.509: a certificate of many extensions")
    func x509() throws {
        let limit = X509Certificate.maxSize
        let key = try SigningKey.generate(.es256)
        let normal = try CertificateBuilder(subject: [("CN", "normal")]).build(key: key, issuer: nil, issuerKey: key).der
        var b = CertificateBuilder(subject: [("CN", "many extensions")])
        b.extensions = (0..<230).map { ("1.3.6.1.4.1.99999.\($0)", false, DERWriter.octets([UInt8](repeating: 0x11, count: 100))) }
        let worst = try b.build(key: key, issuer: nil, issuerKey: key).der
        #expect(try X509Certificate(der: worst).der == worst)
        Self.expectLinear("X.509", normal: normal, worst: worst, limit: limit) { _ = try? X509Certificate(der: $0) }
    }

    @Test("TPM structures: a pubArea with a long authPolicy")
    func tpm() {
        let limit = TPM.maxSize
        func pubArea(policy: Int) -> [UInt8] {
            [0x00, 0x23, 0x00, 0x0b, 0x00, 0x06, 0x04, 0x72, UInt8(policy >> 8), UInt8(policy & 0xff)] + [UInt8](repeating: 0, count: policy)
                + [0x00, 0x10, 0x00, 0x10, 0x00, 0x03, 0x00, 0x10, 0x00, 0x20] + [UInt8](repeating: 1, count: 32) + [0x00, 0x20]
                + [UInt8](repeating: 2, count: 32)
        }
        #expect(errorCode { _ = try TPM.Public(pubArea(policy: 0)) } == nil && errorCode { _ = try TPM.Public(pubArea(policy: limit - 100)) } == nil)
        Self.expectLinear("TPM pubArea", normal: pubArea(policy: 0), worst: pubArea(policy: limit - 100), limit: limit) { _ = try? TPM.Public($0) }
    }
}
