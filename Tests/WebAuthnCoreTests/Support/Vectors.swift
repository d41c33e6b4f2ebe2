import Foundation
@testable import WebAuthnCore
import WebAuthnMetadata
import _WebAuthnEncoding
import _WebAuthnCrypto

/// The one loader for `TestVectors/`: vectors are data files, never pasted into code.
enum Vectors {
    static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("TestVectors")

    static func load(_ relativePath: String) -> JSONValue {
        let data = FileManager.default.contents(atPath: root.appendingPathComponent(relativePath).path)!
        return try! JSONValue.parse([UInt8](data), limits: JSONLimits(maxBytes: 64 << 20, maxDepth: 64))
    }

    /// The JSON file names (without folder) in a vector folder, sorted.
    static func files(_ folder: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }

    /// What the engine must answer for each vector (TestVectors/expectations.json).
    static let expectations: JSONObject = load("expectations.json")["vectors"]!.objectValue!

    static func expectation(_ id: String) -> (result: String, error: String?, repaired: String?) {
        let row = expectations[id]!
        return (row["result"]!.stringValue!, row["error"]?.stringValue, row["repaired"]?.stringValue)
    }

    static func hex(_ value: JSONValue?) -> [UInt8] { Bytes.fromHex(value!.stringValue!)! }
    static func b64(_ value: JSONValue?) -> [UInt8] { Base64URL.decode(value!.stringValue!)! }

    /// A JSON value that may be a string or a list of strings.
    static func strings(_ value: JSONValue?) -> [String] {
        guard let value else { return [] }
        if let s = value.stringValue { return [s] }
        return value.arrayValue?.compactMap(\.stringValue) ?? []
    }

    static func date(_ value: JSONValue?) -> Date? {
        guard let text = value?.stringValue else { return nil }
        let f = ISO8601DateFormatter()
        if let d = f.date(from: text) { return d }
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.date(from: text)
    }
}

/// Runs `body` and returns the WebAuthnError code it threw, or nil on success.
func errorCode(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch let error as WebAuthnError {
        return error.code.rawValue
    } catch {
        return "not a WebAuthnError: \(error)"
    }
}

func errorCode(_ body: () async throws -> Void) async -> String? {
    do {
        try await body()
        return nil
    } catch let error as WebAuthnError {
        return error.code.rawValue
    } catch {
        return "not a WebAuthnError: \(error)"
    }
}

/// A relying party for tests.
func testRP(
    id: String = "example.com", origins: [String] = ["https://example.com"], policy: VerificationPolicy = VerificationPolicy(),
    at date: Date = Date(timeIntervalSince1970: 1_893_456_000)  // 2030-01-01, inside the test certificates' validity
) -> RelyingParty {
    try! RelyingParty(id: id, origins: origins, policy: policy, clock: .fixed(date))
}
