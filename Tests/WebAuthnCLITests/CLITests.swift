import Foundation
import Testing
import WebAuthnCore
import _WebAuthnEncoding

/// The `webauthn` command-line contract: verdicts as JSON on stdout, exit
/// 0 (ok), 1 (verification failed), 2 (usage error).
@Suite("webauthn CLI")
struct CLITests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let vectors = root.appendingPathComponent("TestVectors")

    /// A built binary (`webauthn`, `webauthn-dev`, `webauthn-bench`), next to the test bundle.
    static func binary(_ name: String) -> URL {
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return root.appendingPathComponent(".build/debug/" + name)
    }

    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
        var json: JSONValue? { try? JSONValue.parse(stdout.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Runs `tool` with `arguments`, waited for on a thread of its own: a test waiting for a
    /// subprocess must not hold one of the cooperative pool's threads (two on a 2-core machine),
    /// which the timed checks of every other suite in the process need.
    static func run(_ arguments: [String], stdin: String? = nil, tool: String = "webauthn", environment: [String: String] = [:]) async throws -> Run {
        try await onOwnThread { try runBlocking(arguments, stdin: stdin, tool: tool, environment: environment) }
    }

    /// `body`, which blocks, run on a new thread and awaited.
    static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    /// ``run(_:stdin:tool:)`` on the calling thread. Standard error is drained on another thread
    /// while standard output is read, so that neither pipe can fill and stall the child.
    static func runBlocking(_ arguments: [String], stdin: String?, tool: String, environment: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = binary(tool)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let stderrRead = DispatchGroup()
        nonisolated(unsafe) var e = Data()
        stderrRead.enter()
        Thread {
            e = err.fileHandleForReading.readDataToEndOfFile()
            stderrRead.leave()
        }.start()
        let o = out.fileHandleForReading.readDataToEndOfFile()
        stderrRead.wait()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
    }

    /// Writes one JSON value of a vector to a temporary file.
    static func write(_ value: JSONValue) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("webauthn-cli-\(UUID().uuidString).json").path
        try Data(value.serializedBytes()).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func load(_ path: String) throws -> JSONValue {
        try JSONValue.parse([UInt8](Data(contentsOf: vectors.appendingPathComponent(path))), limits: JSONLimits(maxBytes: 64 << 20, maxDepth: 64))
    }

    static let w3cCovered = [
        "w3c-none-es256.json", "w3c-none-es256-long-credential-id.json", "w3c-packed-es256.json", "w3c-packed-es384.json",
        "w3c-packed-es512.json", "w3c-packed-eddsa.json", "w3c-packed-ed448.json", "w3c-packed-rs256.json", "w3c-packed-self-es256.json",
        "w3c-tpm-es256.json", "w3c-android-key-es256.json", "w3c-apple-es256.json",
    ]

    @Test("verify registration, then authentication with the key it printed", arguments: w3cCovered)
    func w3cVector(file: String) async throws {
        let v = try Self.load("w3c/" + file)
        let challenge = v["webauthn_json"]!["challenge_b64url"]!
        let reg = try await Self.run([
            "verify", "registration", "--rp-id", v["rpId"]!.stringValue!, "--origin", v["origin"]!.stringValue!,
            "--challenge", challenge["registration"]!.stringValue!, "--response", Self.write(v["webauthn_json"]!["registration"]!),
        ])
        #expect(reg.status == 0, "\(reg.stdout) \(reg.stderr)")
        let out = try #require(reg.json)
        #expect(out["status"]?.stringValue == "ok")
        #expect(out["fmt"]?.stringValue == v["attestation_format"]!.stringValue!)
        #expect(out["alg"]?.intValue == v["credential_algorithm"]!["cose"]!.intValue)
        for key in ["attestationType", "trusted", "aaguid", "credentialId", "publicKey", "signCount", "userVerified", "backupEligible", "backedUp"] {
            #expect(out[key] != nil, "missing \(key)")
        }
        let auth = try await Self.run([
            "verify", "authentication", "--rp-id", v["rpId"]!.stringValue!, "--origin", v["origin"]!.stringValue!,
            "--challenge", challenge["authentication"]!.stringValue!, "--public-key", out["publicKey"]!.stringValue!,
            "--response", Self.write(v["webauthn_json"]!["authentication"]!),
        ])
        #expect(auth.status == 0, "\(auth.stdout) \(auth.stderr)")
        #expect(auth.json?["status"]?.stringValue == "ok")
        #expect(auth.json?["signCount"] != nil && auth.json?["userVerified"] != nil && auth.json?["backedUp"] != nil)
    }

    @Test("a response of the other ceremony, or a test vector's whole file, is refused with a hint")
    func hints() async throws {
        let v = try Self.load("w3c/w3c-none-es256.json")
        let base = ["--rp-id", v["rpId"]!.stringValue!, "--origin", v["origin"]!.stringValue!, "--challenge", "AAAA"]
        let registration = try Self.write(v["webauthn_json"]!["registration"]!)
        let registered = try await Self.run(
            [
                "verify", "registration", "--rp-id", v["rpId"]!.stringValue!, "--origin", v["origin"]!.stringValue!, "--challenge",
                v["webauthn_json"]!["challenge_b64url"]!["registration"]!.stringValue!, "--response", registration,
            ])
        let key = try #require(registered.json?["publicKey"]?.stringValue)
        let swapped = try await Self.run(["verify", "authentication"] + base + ["--public-key", key, "--response", registration])
        #expect(swapped.json?["message"]?.stringValue?.contains("use verify registration") == true, "\(swapped.stdout) \(swapped.stderr)")
        let wrapper = try await Self.run(
            ["verify", "registration"] + base + ["--response", Self.vectors.appendingPathComponent("w3c/w3c-none-es256.json").path])
        #expect(wrapper.status == 1 && wrapper.json?["message"]?.stringValue?.contains("test vector's file") == true, "\(wrapper.stdout)")
        // A browser's registration response carries authenticatorData too (L3 toJSON()): one
        // malformed otherwise gets no hint of the other ceremony (red team, thirty-first pass).
        var malformed = v["webauthn_json"]!["registration"]!.objectValue!
        var inner = malformed["response"]!.objectValue!
        inner["authenticatorData"] = "AAAA"
        inner["clientDataJSON"] = nil
        malformed["response"] = .object(inner)
        let own = try await Self.run(["verify", "registration"] + base + ["--response", try Self.write(.object(malformed))])
        #expect(own.status == 1 && own.json?["message"]?.stringValue?.contains("other ceremony") == false, "\(own.stdout)")
        // --at far ahead: the CLI's ceremony does not expire (it did at the year 4001).
        let far = try await Self.run(
            [
                "verify", "registration", "--rp-id", v["rpId"]!.stringValue!, "--origin", v["origin"]!.stringValue!, "--challenge",
                v["webauthn_json"]!["challenge_b64url"]!["registration"]!.stringValue!, "--response", registration, "--at", "4050-01-01T00:00:00Z",
            ])
        #expect(far.status == 0, "\(far.stdout)")
    }

    @Test("cross-origin vectors need --allow-cross-origin or a matching --top-origin")
    func crossOrigin() async throws {
        for (file, flags) in [
            ("w3c-none-es256-crossOrigin.json", ["--allow-cross-origin"]), ("w3c-none-es256-topOrigin.json", ["--top-origin", "https://example.com"]),
        ] {
            let v = try Self.load("w3c/" + file)
            let base = [
                "verify", "registration", "--rp-id", v["rpId"]!.stringValue!, "--origin", v["origin"]!.stringValue!,
                "--challenge", v["webauthn_json"]!["challenge_b64url"]!["registration"]!.stringValue!,
                "--response", try Self.write(v["webauthn_json"]!["registration"]!),
            ]
            let refused = try await Self.run(base)
            #expect(refused.status == 1)
            #expect(refused.json?["status"]?.stringValue == "failed")
            #expect(refused.json?["error"]?.stringValue == "cross_origin_not_allowed")
            #expect(try await Self.run(base + flags).status == 0)
        }
    }

    static let negatives = [
        "derived-reg-wrong-challenge", "derived-reg-wrong-origin", "derived-reg-wrong-rpid", "derived-reg-packed-bad-attestation-signature",
        "derived-auth-es256-bad-signature", "derived-auth-counter-regression", "derived-auth-wrong-origin", "derived-auth-tampered-rpidhash",
    ]

    @Test("negative vectors fail with exit 1 and the expected code", arguments: negatives)
    func negative(id: String) async throws {
        let v = try Self.load("negative/\(id).json")
        let e = v["expected"]!
        let expected = try Self.load("expectations.json")["vectors"]![id]!["error"]!.stringValue!
        var args = [
            "verify", v["ceremony"]!.stringValue!, "--rp-id", e["rpId"]!.stringValue!, "--origin", e["origin"]!.stringValue!,
            "--challenge", e["challenge_b64url"]!.stringValue!, "--response", try Self.write(v["response"]!),
        ]
        if v["ceremony"]!.stringValue! == "authentication" {
            args += ["--public-key", e["credentialPublicKey_cose_b64url"]!.stringValue!, "--sign-count", String(e["stored_sign_count"]!.intValue!)]
        }
        let run = try await Self.run(args)
        #expect(run.status == 1, "\(run.stdout) \(run.stderr)")
        #expect(run.json?["status"]?.stringValue == "failed")
        let code = run.json?["error"]?.stringValue
        #expect(code == expected)
        let message = run.json?["message"]?.stringValue ?? ""
        #expect(message.count > 10)
    }

    @Test("usage errors exit 2")
    func usage() async throws {
        #expect(try await Self.run(["verify", "registration", "--rp-id", "example.com"]).status == 2)
        #expect(try await Self.run(["verify", "registration", "--rp-id", "example.com", "--challenge", "AA", "--response", "-"]).status == 2)  // no origin
        #expect(
            try await Self.run(["verify", "registration", "--rp-id", "example.com", "--origin", "https://example.com", "--challenge", "!!", "--response", "-"])
                .status
                == 2)
        #expect(
            try await Self.run([
                "verify", "registration", "--rp-id", "example.com", "--origin", "https://example.com", "--challenge", "AA", "--response", "/nonexistent",
            ]).status == 2)
        #expect(
            try await Self.run([
                "verify", "registration", "--rp-id", "example.com", "--origin", "https://example.com", "--challenge", "AA", "--response", "-",
                "--attestation-types", "bogus",
            ]).status == 2)
        #expect(try await Self.run(["frobnicate"]).status == 2)
        // A public key that is not a COSE_Key is the option's fault (an adopter's review: it
        // answered cbor_malformed, exit 1, as if the response had failed).
        let badKey = try await Self.run([
            "verify", "authentication", "--rp-id", "example.com", "--origin", "https://example.com", "--challenge", "AA", "--response", "-",
            "--public-key", "AAAA",
        ])
        #expect(badKey.status == 2 && badKey.stderr.contains("--public-key is not a COSE_Key"), "\(badKey.status) \(badKey.stderr)")
        // serve refuses algorithms it does not know and RS1 before it opens anything.
        for list in ["RS1", "ES256,nope", ""] {
            #expect(try await Self.run(["serve", "--algorithms", list, "--db", "sqlite:/nonexistent-dir/x.sqlite"]).status == 2, "\(list)")
        }
        #expect(try await Self.run(["metadata", "inspect", "--mds-blob", "/nonexistent.jwt"]).status == 2)
        // serve's safety options are checked before it opens anything.
        let short = FileManager.default.temporaryDirectory.appendingPathComponent("short-secret-\(UUID().uuidString)")
        try Data("too short".utf8).write(to: short)
        // 11 bytes that are not UTF-8: decoded as text, each became a 3-byte replacement
        // character, and the file passed the 32-byte minimum (red team, thirty-first pass).
        let binary = FileManager.default.temporaryDirectory.appendingPathComponent("binary-secret-\(UUID().uuidString)")
        try Data(repeating: 0xFF, count: 11).write(to: binary)
        defer { try? FileManager.default.removeItem(at: binary) }
        for extra in [
            ["--rate-limit", "fast"], ["--rate-limit", "0"], ["--trusted-proxy", "10.0.0.0/40"], ["--secret-file", short.path], ["--secret-file", binary.path],
            ["--secret-file", "/nonexistent-secret"], ["--db-connections", "2"], ["--allocator-trim-interval", "-1"],
            ["--allocator-trim-interval", "86401"],
        ] {
            #expect(try await Self.run(["serve", "--db", "sqlite:/nonexistent-dir/x.sqlite"] + extra).status == 2, "\(extra)")
        }
        // An HTTPS_PROXY that cannot be used stops a serve that fetches, before it opens anything;
        // one that fetches nothing does not read it.
        let fetching = ["serve", "--db", "sqlite:/nonexistent-dir/x.sqlite", "--mds-url", "https://mds3.fidoalliance.org/"]
        for bad in ["socks5://proxy:1080", "http://proxy", "https://proxy:3128"] {
            let run = try await Self.run(fetching, environment: ["HTTPS_PROXY": bad])
            #expect(run.status == 2 && run.stderr.contains("HTTPS_PROXY"), "\(bad): \(run.stderr)")
        }
        let quiet = try await Self.run(["serve", "--db", "sqlite:/nonexistent-dir/x.sqlite"], environment: ["HTTPS_PROXY": "socks5://proxy:1080"])
        #expect(quiet.status != 2 && !quiet.stderr.contains("HTTPS_PROXY"), "\(quiet.stderr)")
        // PostgreSQL connections: 1 to 64, refused before anything connects (nothing listens on port 1).
        for count in ["0", "65", "-1", "many"] {
            let run = try await Self.run(["serve", "--db", "postgres://nobody@127.0.0.1:1/none", "--db-connections", count])
            #expect(run.status == 2 && run.stderr.contains("db-connections"), "\(count): \(run.stderr)")
        }
        #expect(try await Self.run(["--help"]).status == 0)
    }

    @Test("option values may start with '-', and - reads stdin")
    func dashValues() async throws {
        let v = try Self.load("w3c/w3c-none-es256.json")
        // A challenge that starts with '-': the response is refused for the challenge, not the parse.
        let run = try await Self.run(
            [
                "verify", "registration", "--rp-id", v["rpId"]!.stringValue!, "--origin", v["origin"]!.stringValue!,
                "--challenge", "-AAAAAAAAAAAAAAAAAAAAA", "--response", "-",
            ],
            stdin: v["webauthn_json"]!["registration"]!.serialized())
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.json?["error"]?.stringValue == "challenge_mismatch")
    }

    @Test("inspect decodes a response into readable JSON")
    func inspect() async throws {
        let v = try Self.load("w3c/w3c-packed-es256.json")
        let run = try await Self.run(["inspect", try Self.write(v["webauthn_json"]!["registration"]!)])
        #expect(run.status == 0, "\(run.stderr)")
        let out = try #require(run.json)
        #expect(out["attestationObject"]?["fmt"]?.stringValue == "packed")
        #expect(out["attestationObject"]?["authData"]?["flags"]?["AT"]?.boolValue == true)
        #expect(out["attestationObject"]?["attStmt"]?["x5c"]?.arrayValue?.first?["subject"]?.stringValue?.contains("Authenticator Attestation") == true)
        #expect(out["clientData"]?["type"]?.stringValue == "webauthn.create")
        // CBOR floats JSON cannot hold (red team, twelfth pass: printed as nan and inf, which no parser reads).
        let authData = [UInt8](repeating: 0, count: 32) + [0x01, 0, 0, 0, 1]
        let floats = CBOREncoder.encode(
            .map([
                CBORPair(.text("fmt"), .text("none")),
                CBORPair(
                    .text("attStmt"),
                    .map([
                        CBORPair(.text("n"), .float(.nan)), CBORPair(.text("i"), .float(.infinity)), CBORPair(.text("m"), .float(-.infinity)),
                        // Integers past 2^53 (the last note: printed as rounded doubles).
                        CBORPair(.text("big"), .unsigned(.max)), CBORPair(.text("small"), .negative(.max)),
                        CBORPair(.text("edge"), .unsigned(1 << 53 + 1)), CBORPair(.text("exact"), .negative((1 << 53) - 1)),
                    ])),
                CBORPair(.text("authData"), .bytes(authData)),
            ]))
        let odd = try await Self.run(["inspect", "-"], stdin: Base64URL.encode(floats))
        let statement = try #require(odd.json?["attStmt"], "\(odd.stdout) \(odd.stderr)")
        #expect(statement["n"] == "NaN" && statement["i"] == "Infinity" && statement["m"] == "-Infinity")
        #expect(statement["big"] == "18446744073709551615" && statement["small"] == "-18446744073709551616", "\(odd.stdout)")
        #expect(statement["edge"] == "9007199254740993" && statement["exact"] == .number(-9_007_199_254_740_992), "\(odd.stdout)")
        // Map keys that would share a name (the text "1" beside the integer 1) make an array of
        // pairs, and statement keys are never Swift's debugging text (red team, eighteenth pass:
        // one member hid the other, and keys printed as `unsigned(1)`).
        let keys = CBOREncoder.encode(
            .map([
                CBORPair(.text("fmt"), .text("none")),
                CBORPair(
                    .text("attStmt"),
                    .map([
                        CBORPair(.unsigned(1), .text("int")), CBORPair(.negative(0), .text("minus")),
                        CBORPair(.bytes([1]), .text("bytes")),
                        CBORPair(.text("nested"), .map([CBORPair(.unsigned(1), .text("a")), CBORPair(.text("1"), .text("b"))])),
                        // The integer 0 and the float 0.0 are both `0` in JSON: each pair names its key's type.
                        CBORPair(.text("zeros"), .map([CBORPair(.unsigned(0), .text("int")), CBORPair(.float(0), .text("float"))])),
                    ])),
                CBORPair(.text("authData"), .bytes(authData)),
            ]))
        let keyed = try await Self.run(["inspect", "-"], stdin: Base64URL.encode(keys))
        let keyedStatement = try #require(keyed.json?["attStmt"], "\(keyed.stdout) \(keyed.stderr)")
        #expect(keyedStatement["1"] == "int" && keyedStatement["-1"] == "minus" && keyedStatement["h'01'"] == "bytes", "\(keyed.stdout)")
        let pairs = try #require(keyedStatement["nested"]?.arrayValue, "\(keyed.stdout)")
        #expect(pairs.count == 2 && pairs[0]["key"] == "1" && pairs[0]["value"] == "a" && pairs[1]["key"] == "1" && pairs[1]["value"] == "b")
        #expect(pairs.map { $0["type"] } == ["integer", "text"], "\(keyed.stdout)")
        #expect(keyedStatement["zeros"]?["0"] == "int" && keyedStatement["zeros"]?["0.0"] == "float", "\(keyed.stdout)")
        #expect(!keyed.stdout.contains("unsigned("), "\(keyed.stdout)")
        let bad = try await Self.run(["inspect", "-"], stdin: "oA")
        #expect(bad.status == 1)
        #expect(bad.json?["error"]?.stringValue == "attestation_object_malformed")
    }

    @Test("the demo runs a full ceremony and refuses the replay")
    func demo() async throws {
        let run = try await Self.run(["demo"], tool: "webauthn-dev")
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("replay refused"))
        #expect(run.stdout.contains("\"error\":\"challenge_unknown\""))
    }

    @Test("bench --json reports the contract names and ratios, the server's routes on SQLite among them")
    func bench() async throws {
        let run = try await Self.run(["--json", "--seconds", "0.05", "--no-openssl-speed"], tool: "webauthn-bench")
        #expect(run.status == 0, "\(run.stderr)")
        let names = Set(run.json?["results"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
        for name in [
            "es256-authentication", "eddsa-authentication", "rs256-authentication", "es256-packed-registration", "openssl-p256-verify", "server-routes-sqlite",
        ] {
            #expect(names.contains(name), "missing \(name)")
        }
        #expect(run.json?["ratios"]?["es256-authentication/openssl-p256-verify"]?.numberValue ?? 0 > 0)
        // The server's routes on SQLite, in-process: sign-ins happened, and they cost more than the engine alone.
        let routes = run.json?["ratios"]?["server-routes-sqlite/es256-authentication"]?.numberValue ?? 0
        #expect(routes > 0 && routes < 1, "\(routes)")
    }
}

extension CLITests {
    @Test("--metadata makes a real YubiKey trusted; --require-trusted-attestation refuses it without")
    func metadataTrust() async throws {
        let v = try Self.load("realworld/py_webauthn-reg-packed-verify_attestation_from_yubikey_firefox.json")
        let e = v["expected"]!
        let base = [
            "verify", "registration", "--rp-id", e["rpId"]!.stringValue!, "--origin", e["origin"]!.stringValue!,
            "--challenge", e["challenge_b64url"]!.stringValue!, "--response", try Self.write(v["response"]!),
            "--at", "2024-08-31T12:00:00Z", "--require-trusted-attestation",
        ]
        let refused = try await Self.run(base)
        #expect(refused.status == 1)
        let code = refused.json?["error"]?.stringValue
        #expect(code == "attestation_untrusted")
        let trusted = try await Self.run(base + ["--metadata", Self.vectors.appendingPathComponent("mds/production/fido-mds3-blob-no85.jwt").path])
        #expect(trusted.status == 0, "\(trusted.stdout) \(trusted.stderr)")
        #expect(trusted.json?["trusted"]?.boolValue == true)
        let description = trusted.json?["metadata"]?["description"]?.stringValue
        #expect(description == "Security Key by Yubico with NFC")
        let types = try await Self.run(base + ["--attestation-types", "none,self"])
        let typeCode = types.json?["error"]?.stringValue
        #expect(typeCode == "attestation_type_not_allowed")
    }

    @Test("metadata inspect lists a BLOB's entries, and refuses a stale or foreign one")
    func metadataInspect() async throws {
        let blob = Self.vectors.appendingPathComponent("mds/production/fido-mds3-blob-no6.jwt").path
        // --at is RFC 3339, checked field by field (red team, sixteenth pass: Foundation took
        // February 30, +99:99 and 24:00:00, and a 12-digit year wrapped to millions of years BC).
        for bad in [
            "2024-02-30T00:00:00Z", "2021-08-25T00:00:00+99:99", "2021-08-25T24:00:00Z", "292277026596-12-04T15:30:07Z", "-9999-01-01T00:00:00Z", "2021-08-25",
        ] {
            #expect(try await Self.run(["metadata", "inspect", "--metadata", blob, "--at", bad]).status == 2, "\(bad)")
        }
        for good in ["2021-08-25T02:00:00+02:00", "2021-08-25T00:00:00.5Z"] {
            let run = try await Self.run(["metadata", "inspect", "--metadata", blob, "--at", good])
            #expect(run.status == 0, "\(good): \(run.stdout.prefix(200)) \(run.stderr)")
        }
        let run = try await Self.run(["metadata", "inspect", "--metadata", blob, "--at", "2021-08-25T00:00:00Z"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.json?["no"]?.intValue == 6)
        let count = run.json?["entries"]?.arrayValue?.count ?? 0
        #expect(count > 70)
        let first = run.json?["entries"]?.arrayValue?.first
        #expect(first?["description"]?.stringValue != nil && first?["attestationTypes"] != nil && first?["status"] != nil)
        let stale = try await Self.run(["metadata", "inspect", "--metadata", blob, "--at", "2021-10-01T00:00:00Z"])
        let staleCode = stale.json?["error"]?.stringValue
        #expect(stale.status == 1 && staleCode == "metadata_stale")
        let conformance = Self.vectors.appendingPathComponent("mds/conformance/fido-conformance-mds3-blob-no42.jwt").path
        let foreign = try await Self.run(["metadata", "inspect", "--metadata", conformance, "--at", "2022-11-01T00:00:00Z"])
        let foreignCode = foreign.json?["error"]?.stringValue
        #expect(foreignCode == "metadata_untrusted")
        let withRoot = try await Self.run([
            "metadata", "inspect", "--metadata", conformance, "--at", "2022-11-01T00:00:00Z",
            "--metadata-root", Self.vectors.appendingPathComponent("mds/conformance/fido-conformance-mds3-root.pem").path,
        ])
        #expect(withRoot.status == 0)
        #expect(try await Self.run(["metadata", "inspect"]).status == 2)
    }

    /// A temporary folder holding the conformance runner's metadata (`mds/`: BLOBs good and bad, the root, CRLs).
    static func conformanceMetadata() async throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("mds-\(UUID().uuidString)").path
        let made = try await run(
            [
                "conformance", "--url", "http://127.0.0.1:1", "--rp-id", "example.com", "--origin", "https://example.com",
                "--metadata-out", folder, "--write-metadata-only",
            ], tool: "webauthn-dev")
        #expect(made.status == 0, "\(made.stderr)")
        return folder
    }

    @Test("metadata audit refuses to run on metadata that does not all verify; inspect fails when nothing verifies")
    func auditNeedsVerifiedMetadata() async throws {
        // Red team, sixteenth pass (high): a 7-byte BLOB, an unsigned one or an expired chain left
        // the audit with no metadata; it cleared every flag, exit 0, stderr empty. And `metadata
        // inspect` said `"status":"ok"`, exit 0, when no BLOB verified.
        let folder = try await Self.conformanceMetadata()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let mds = folder + "/mds"
        let garbage = folder + "/garbage.jwt"
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: garbage))
        let db = folder + "/audit.sqlite"
        for blobs in [[garbage], [mds]] {
            let audit = try await Self.run(
                ["metadata", "audit", "--db", "sqlite:" + db, "--metadata-root", mds + "/mds-root.pem", "--dry-run"] + blobs.flatMap { ["--mds-blob", $0] })
            #expect(audit.status == 1 && audit.json?["status"]?.stringValue == "failed", "\(blobs): \(audit.stdout) \(audit.stderr)")
            #expect(audit.json?["message"]?.stringValue?.contains("changed nothing") == true, "\(audit.stdout)")
            #expect(!FileManager.default.fileExists(atPath: db), "the store was opened")
        }
        let inspect = try await Self.run(["metadata", "inspect", "--mds-blob", garbage])
        #expect(inspect.status == 1 && inspect.json?["status"]?.stringValue == "failed", "\(inspect.stdout)")
        // A database that is not there is not created, under --dry-run or not (red team, sixteenth pass).
        for extra in [["--dry-run"], []] {
            let missing = try await Self.run(
                ["metadata", "audit", "--db", "sqlite:" + db, "--mds-blob", mds + "/good.jwt", "--metadata-root", mds + "/mds-root.pem"] + extra)
            #expect(missing.status == 1 && missing.json?["message"]?.stringValue?.contains("no database") == true, "\(missing.stdout)")
            #expect(!FileManager.default.fileExists(atPath: db), "the audit created the database")
        }
        // Nor is a file that is not this server's database taken over (red team, seventeenth pass:
        // an empty file, or another application's database, got the tables under --dry-run).
        #expect(FileManager.default.createFile(atPath: db, contents: Data()))
        let empty = try await Self.run(
            ["metadata", "audit", "--db", "sqlite:" + db, "--mds-blob", mds + "/good.jwt", "--metadata-root", mds + "/mds-root.pem", "--dry-run"])
        #expect(empty.status == 1 && empty.json?["message"]?.stringValue?.contains("not a database of this server") == true, "\(empty.stdout)")
        #expect((try FileManager.default.attributesOfItem(atPath: db)[.size] as? Int) == 0, "the audit wrote to the file")
    }

    @Test("what a rejected input quoted reaches standard error with its control and bidirectional characters escaped")
    func stderrEscaped() async throws {
        // Red team, sixteenth pass: a BLOB whose header repeats a member named with an escape
        // sequence set the terminal's title, cleared the screen and printed a forged line.
        let header = Base64URL.encode(Array(#"{"alg":"RS256","\u001b]0;PWNED\u0007\u202e\u3164":1,"\u001b]0;PWNED\u0007\u202e\u3164":2}"#.utf8))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("esc-\(UUID().uuidString).jwt").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data((header + ".e30.c2ln").utf8).write(to: URL(fileURLWithPath: path))
        let v = try Self.load("w3c/w3c-none-es256.json")
        let run = try await Self.run([
            "verify", "registration", "--rp-id", v["rpId"]!.stringValue!, "--origin", v["origin"]!.stringValue!,
            "--challenge", v["webauthn_json"]!["challenge_b64url"]!["registration"]!.stringValue!,
            "--response", Self.write(v["webauthn_json"]!["registration"]!), "--mds-blob", path,
        ])
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        #expect(run.stderr.contains("rejected") && run.stderr.contains("\\u{1b}]0;PWNED\\u{7}\\u{202e}\\u{3164}"), "\(run.stderr.debugDescription)")
        #expect(
            !run.stderr.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x202E || $0.value == 0x3164 },
            "\(run.stderr.debugDescription)")
        // A usage error's own lines stay lines (the re-check found them written as \u{a}).
        let usage = try await Self.run(["verify", "registration", "--rp-id", "example.com"])
        #expect(usage.status == 2 && usage.stderr.contains("\n") && !usage.stderr.contains("\\u{a}"), "\(usage.stderr.debugDescription)")
    }

    @Test("--mds-blob uses the BLOBs that verify and reports each rejected one; without the CRLs, revocations go unseen")
    func mdsBlobs() async throws {
        let folder = try await Self.conformanceMetadata()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let mds = folder + "/mds"
        let run = try await Self.run(["metadata", "inspect", "--mds-blob", mds, "--metadata-root", mds + "/mds-root.pem", "--metadata-crl", mds])
        #expect(run.status == 0, "\(run.stderr)")
        let rejected = run.json?["rejected"]?.arrayValue ?? []
        let files = rejected.compactMap { $0["file"]?.stringValue.map { ($0 as NSString).lastPathComponent } }
        #expect(files == ["bad-chain.jwt", "bad-signature.jwt", "revoked-intermediate.jwt", "revoked-signer.jwt"])
        #expect(rejected.allSatisfy { $0["error"]?.stringValue == "metadata_untrusted" })
        #expect(run.json?["entries"]?.arrayValue?.count == 2)
        // Each BLOB that verified is listed with its own number and next update (they were
        // reported only for --metadata: `"no": null` for every --mds-blob).
        let accepted = run.json?["accepted"]?.arrayValue ?? []
        #expect(accepted.count == 2 && accepted.allSatisfy { $0["no"]?.numberValue != nil && $0["nextUpdate"]?.stringValue != nil }, "\(accepted)")
        #expect(accepted.compactMap { $0["entries"]?.numberValue }.reduce(0, +) == 2)
        // The same BLOBs without CRLs: only the signature and the chain fail.
        let noCRLs = try await Self.run(["metadata", "inspect", "--mds-blob", mds, "--metadata-root", mds + "/mds-root.pem"])
        #expect(noCRLs.json?["rejected"]?.arrayValue?.count == 2)
        // A CRL file that is not a CRL is a usage error, not a silent skip.
        let bogus = folder + "/bogus.crl"
        try Data("-----BEGIN X509 CRL-----\n!!!\n".utf8).write(to: URL(fileURLWithPath: bogus))
        #expect(try await Self.run(["metadata", "inspect", "--mds-blob", mds, "--metadata-crl", bogus]).status == 2)
        // So is a folder without a CRL: read again by serve while its files were replaced, it would
        // have verified the next BLOB without any CRL (red team, eleventh pass).
        let empty = folder + "/no-crls"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let noCRL = try await Self.run(["metadata", "inspect", "--mds-blob", mds, "--metadata-crl", empty])
        #expect(noCRL.status == 2 && noCRL.stderr.contains("holds no .crl file"), "\(noCRL.status) \(noCRL.stderr)")
    }

    @Test("operator files larger than their limit are refused unread: a 3 GB CRL, root or response file; a FIFO or a device is refused")
    func oversizedFiles() async throws {
        // Red team: --metadata-crl read a 3 GB file whole (6 GB of memory, 20 s and counting) before its size was checked.
        let big = FileManager.default.temporaryDirectory.appendingPathComponent("big-\(UUID().uuidString).crl").path
        #expect(FileManager.default.createFile(atPath: big, contents: nil))
        defer { try? FileManager.default.removeItem(atPath: big) }
        let handle = try #require(FileHandle(forWritingAtPath: big))
        try handle.truncate(atOffset: 3 << 30)  // sparse: no disk used
        try handle.close()
        for arguments in [
            ["metadata", "inspect", "--mds-blob", "/nonexistent", "--metadata-crl", big],
            ["metadata", "inspect", "--mds-blob", "/nonexistent", "--metadata-root", big],
            ["inspect", big],
            ["metadata", "inspect", "--mds-blob", "/nonexistent", "--metadata-crl", "/dev/zero"],
        ] {
            let run = try await Self.run(arguments)
            #expect(run.status == 2 && run.stderr.contains("cannot read"), "\(arguments): \(run.status) \(run.stderr.prefix(300))")
        }
    }

    @Test("a 32 MiB BLOB of dots and a 1 MiB token of invalid UTF-8 are refused within 600 MB of address space")
    func worstFilesInBoundedMemory() async throws {
        // Red team: splitting the BLOB on its dots made 33 million slices (1.2 GB, also for each
        // --mds-url fetch); 16 MiB of invalid UTF-8 read as a token held 214 MB.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("worst-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let dots = folder + "/dots.jwt", invalid = folder + "/token.bin", jwks = folder + "/keys.json"
        try Data(repeating: UInt8(ascii: "."), count: 32 << 20).write(to: URL(fileURLWithPath: dots))
        try Data(repeating: 0xFF, count: 1 << 20).write(to: URL(fileURLWithPath: invalid))
        try Data(#"{"keys":[]}"#.utf8).write(to: URL(fileURLWithPath: jwks))
        let webauthn = Self.binary("webauthn").path
        // A BLOB that does not verify, when none does, and a refused token exit 1.
        for (arguments, status, expected) in [
            (["metadata", "inspect", "--mds-blob", dots], Int32(1), "three dot-separated parts"),
            (["apple", "verify-token", "--token", invalid, "--jwks", jwks, "--client-id", "com.example.app"], Int32(1), "a token is at most"),
        ] {
            let run = try await Self.onOwnThread { () throws -> Run in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/bin/sh")
                process.arguments = ["-c", "ulimit -v 600000; exec \"$0\" \"$@\"", webauthn] + arguments
                let out = Pipe(), err = Pipe()
                process.standardOutput = out
                process.standardError = err
                try process.run()
                let e = err.fileHandleForReading.readDataToEndOfFile()
                let o = out.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                return Run(status: process.terminationStatus, stdout: String(decoding: o, as: UTF8.self), stderr: String(decoding: e, as: UTF8.self))
            }
            let output = run.stdout + run.stderr
            #expect(run.status == status && output.contains(expected), "\(arguments[0]): \(run.status) \(output.prefix(300))")
        }
    }

    @Test("the deployable binary links no testing code; webauthn-dev does (nm)")
    func deployableBinaryHasNoTestingCode() async throws {
        func symbols(_ tool: String) async throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["nm", "--defined-only", Self.binary(tool).path]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            let data = try await Self.onOwnThread {
                let data = out.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                return data
            }
            #expect(process.terminationStatus == 0, "nm \(tool)")
            return String(decoding: data, as: UTF8.self)
        }
        let testing = ["15WebAuthnTesting", "21SoftwareAuthenticator", "20AttestationAuthority", "19WebAuthnConformance", "12AppleStandIn"]
        let deployed = try await symbols("webauthn")
        #expect(deployed.contains("12WebAuthnCore"), "nm found no engine symbols; the check would be vacuous")
        for name in testing { #expect(!deployed.contains(name), "webauthn links \(name)") }
        let dev = try await symbols("webauthn-dev")
        #expect(dev.contains("21SoftwareAuthenticator"))
    }
}
