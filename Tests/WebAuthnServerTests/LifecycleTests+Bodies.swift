import Foundation
import Testing
import WebAuthnTesting
import _WebAuthnEncoding

extension LifecycleTests {
    @Test("a deletion acts only on a request it could read: a body declared too large or a malformed chunked body changes nothing")
    func deletionsReadTheirRequest() async throws {
        // Red team, round 26: `DELETE /demo/account` with a malformed chunked body deleted the
        // account and answered 200, and so did a passkey's deletion that declared a 1 GB body.
        let server = try await start()
        defer { server.stop() }
        let authenticator = Self.passkey()
        let (first, cookie, _) = try await register(server, authenticator, username: "alice")
        let (second, added, reply) = try await register(server, authenticator, username: "alice", cookie: cookie)
        #expect(reply.ok, "\(reply.errorMessage)")
        let session = try #require(added)
        func listed() async throws -> [String] {
            try await server.request("/demo/credentials", cookie: session).json["credentials"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        }
        #expect(Set(try await listed()) == [Base64URL.encode(first), Base64URL.encode(second)])
        let framings = [
            ("a body declared too large", "Content-Length: 1000000000\r\n\r\n", "HTTP/1.1 413", "input_too_large"),
            ("a malformed chunked body", "Transfer-Encoding: chunked\r\n\r\nZZZZ-not-a-chunk-size\r\n\r\n", "HTTP/1.1 400", "request_malformed"),
        ]
        for path in ["/demo/credentials/\(Base64URL.encode(first))", "/demo/account"] {
            for (name, rest, status, code) in framings {
                let connection = try RawConnection(port: server.port)
                defer { connection.close() }
                try connection.send("DELETE \(path) HTTP/1.1\r\nHost: localhost\r\nCookie: \(session)\r\n" + rest)
                let (text, _) = connection.drain()
                #expect(text.hasPrefix(status) && text.contains(code), "\(path), \(name): \(text.prefix(300))")
            }
        }
        #expect(Set(try await listed()) == [Base64URL.encode(first), Base64URL.encode(second)], "nothing was deleted")
        // The same deletion, readable, goes through.
        let deleted = try await server.request("/demo/credentials/\(Base64URL.encode(first))", cookie: session, method: "DELETE")
        #expect(deleted.ok, "\(deleted.errorMessage)")
        #expect(try await listed() == [Base64URL.encode(second)])
    }

    @Test("request members of the wrong type are request_malformed on every options route, not read as absent")
    func requestMembersTyped() async throws {
        // Red team, round 26: `{"username": 5}` and a body of `[1,2]` got usernameless sign-in
        // options, a non-string displayName or attestation was ignored, and the re-authentication
        // options ignored a body that was not JSON.
        let server = try await start()
        defer { server.stop() }
        let (_, cookie, _) = try await register(server, Self.passkey(), username: "bob")
        let cases: [(String, [UInt8])] = [
            ("/assertion/options", Array(#"{"username":5}"#.utf8)), ("/assertion/options", Array("[1,2]".utf8)),
            ("/assertion/options", Array(#""bob""#.utf8)), ("/assertion/options", Array(#"{"userVerification":7}"#.utf8)),
            ("/assertion/options", Array(#"{"extensions":"x"}"#.utf8)), ("/assertion/options", Array(#"{"hints":["security-key",1]}"#.utf8)),
            ("/attestation/options", Array(#"{"username":"carol","displayName":5}"#.utf8)),
            ("/attestation/options", Array(#"{"username":"carol","authenticatorSelection":"x"}"#.utf8)),
            ("/attestation/options", Array(#"{"username":"carol","attestation":1}"#.utf8)),
            ("/attestation/options", Array(#"{"username":"carol","hints":"security-key"}"#.utf8)),
            // Inside the members too (re-check of round 26: these were dropped).
            ("/attestation/options", Array(#"{"username":"carol","hints":["security-key",5]}"#.utf8)),
            ("/attestation/options", Array(#"{"username":"carol","attestationFormats":[{}]}"#.utf8)),
            ("/attestation/options", Array(#"{"username":"carol","authenticatorSelection":{"residentKey":1}}"#.utf8)),
            ("/attestation/options", Array(#"{"username":"carol","authenticatorSelection":{"requireResidentKey":"yes"}}"#.utf8)),
            ("/attestation/options", Array(#"{"username":"carol","authenticatorSelection":{"userVerification":[]}}"#.utf8)),
            ("/reauthentication/options", Array("[]".utf8)),
        ]
        for (path, body) in cases {
            let reply = try await server.request(path, cookie: cookie, raw: body)
            #expect(
                reply.status == 400 && reply.errorMessage.hasPrefix("request_malformed:"),
                "\(path) \(String(decoding: body, as: UTF8.self)): \(reply.errorMessage)")
        }
        let notJSON = try await server.request("/reauthentication/options", cookie: cookie, raw: Array("not json".utf8))
        #expect(notJSON.status == 400 && notJSON.errorMessage.hasPrefix("json_malformed:"), "\(notJSON.errorMessage)")
        // Null is absent, as before; an empty body asks for re-authentication options as `{}` does.
        let nulls = try await server.request("/assertion/options", ["username": .null, "extensions": .null])
        #expect(nulls.ok, "\(nulls.errorMessage)")
        // Unknown strings are ignored, as a browser ignores unknown enumeration values.
        let unknown = try await server.request(
            "/attestation/options",
            ["username": "dave", "hints": ["hologram"], "authenticatorSelection": ["residentKey": "sometimes", "requireResidentKey": false]])
        #expect(unknown.ok, "\(unknown.errorMessage)")
        let empty = try await server.request("/reauthentication/options", cookie: cookie, raw: [])
        #expect(empty.ok, "\(empty.errorMessage)")
    }
}
