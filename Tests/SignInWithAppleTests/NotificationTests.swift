import Foundation
import Testing
import SignInWithApple
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

@Suite("Apple server-to-server notifications")
struct NotificationTests {
    let f: TokenFixture
    init() throws { f = try TokenFixture() }

    func body(events: JSONValue, jti: String? = "jti-1", aud: String = TokenFixture.clientID, edit: (inout JSONObject) -> Void = { _ in }) -> [UInt8] {
        var claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(aud), "iat": .number(TokenFixture.now.timeIntervalSince1970),
            "events": events,
        ]
        if let jti { claims["jti"] = .string(jti) }
        edit(&claims)
        return JSONValue.object(["payload": .string(f.standIn.sign(.object(claims)))]).serializedBytes()
    }

    func verify(_ body: [UInt8]) throws -> AppleNotification {
        try AppleNotification.verify(body: body, keys: f.keys, clientIDs: [TokenFixture.clientID], now: TokenFixture.now)
    }

    func code(_ body: [UInt8]) -> String? {
        do { _ = try verify(body); return nil } catch let e as WebAuthnError { return e.code.rawValue } catch { return "\(error)" }
    }

    static let event: JSONObject = [
        "type": "email-disabled", "sub": "001234.abc.0042", "email": "x@privaterelay.appleid.com",
        "is_private_email": "true", "event_time": 1_800_000_000_123,
    ]

    @Test("events as an object and as a JSON-encoded string read the same")
    func shapes() throws {
        let object = try verify(body(events: .object(Self.event)))
        let string = try verify(body(events: .string(JSONValue.object(Self.event).serialized())))
        for n in [object, string] {
            #expect(n.event == .emailDisabled)
            #expect(n.sub == "001234.abc.0042")
            #expect(n.email == "x@privaterelay.appleid.com")
            #expect(n.isPrivateEmail == true)
            #expect(n.audience == TokenFixture.clientID)
            #expect(n.eventTime == Date(timeIntervalSince1970: 1_800_000_000.123))
        }
    }

    @Test("events.email is an address, as an identity token's email")
    func eventEmail() throws {
        for bad in TokenVerificationTests.badEmails {
            var e = Self.event
            e["email"] = .string(bad)
            #expect(code(body(events: .object(e))) == "apple_notification_invalid", "\(bad.debugDescription)")
        }
        var e = Self.event
        e["email"] = 5
        #expect(code(body(events: .object(e))) == "apple_notification_invalid")
    }

    @Test("event types: both delete spellings are one case; unknown types are kept")
    func types() throws {
        let cases: [(String, AppleNotification.Event)] = [
            ("email-disabled", .emailDisabled), ("email-enabled", .emailEnabled), ("consent-revoked", .consentRevoked),
            ("account-delete", .accountDeleted), ("account-deleted", .accountDeleted), ("something-new", .other("something-new")),
        ]
        for (type, expected) in cases {
            var e = Self.event
            e["type"] = .string(type)
            let n = try verify(body(events: .object(e)))
            #expect(n.event == expected)
            #expect(n.type == type)
        }
    }

    @Test("event_time in seconds or milliseconds")
    func eventTime() throws {
        for (raw, seconds) in [(1_800_000_000.0, 1_800_000_000.0), (1_800_000_000_000.0, 1_800_000_000.0), (1_800_000_000_500.0, 1_800_000_000.5)] {
            var e = Self.event
            e["event_time"] = .number(raw)
            #expect(try verify(body(events: .object(e))).eventTime == Date(timeIntervalSince1970: seconds))
        }
        var e = Self.event
        e["event_time"] = "soon"
        #expect(code(body(events: .object(e))) == "apple_notification_invalid")
    }

    @Test("the dedupe key: jti when present, else SHA-256 of the payload, stable for one payload")
    func dedupe() throws {
        #expect(try verify(body(events: .object(Self.event), jti: "abc")).dedupeKey == "abc")
        let noJTI = body(events: .object(Self.event), jti: nil)
        let first = try verify(noJTI).dedupeKey
        #expect(first == (try verify(noJTI).dedupeKey))
        #expect(first.count == 64)
        var other = Self.event
        other["type"] = "email-enabled"
        #expect(try verify(body(events: .object(other), jti: nil)).dedupeKey != first)
        // One token has one text (red team: a signature re-encoded with padding, + and /, or other
        // spare bits was a new key, and the notification was acted on again): each other text is refused.
        let payload = try #require(JSONValue.parse(noJTI)["payload"]?.stringValue)
        let parts = payload.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let signature = parts[2]
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let lastCharacter = try #require(signature.last)
        let last = try #require(alphabet.firstIndex(of: lastCharacter))
        var variants = [
            signature + String(repeating: "=", count: (4 - signature.count % 4) % 4),  // padded
            String(signature.dropLast()) + String(alphabet[last ^ 1]),  // a spare bit set (or cleared)
        ]
        let standard = signature.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        if standard != signature { variants.append(standard) }
        #expect(signature.count % 4 != 0 && signature.count % 4 != 1, "the signature's text has spare bits to set")
        for variant in variants {
            let forged = JSONValue.object(["payload": .string(parts[0] + "." + parts[1] + "." + variant)]).serializedBytes()
            #expect(code(forged) == "apple_token_malformed", "\(variant.suffix(6))")
        }
    }

    @Test("events.sub is 1 to 255 visible ASCII characters: a NUL, a space, a control or another script is refused")
    func eventSub() throws {
        for sub in ["001234.abc\u{0}0042", "001234.abc 0042", "001234.abc\n", "001234.аbc", String(repeating: "a", count: 256), ""] {
            var event = Self.event
            event["sub"] = .string(sub)
            #expect(code(body(events: .object(event))) == "apple_notification_invalid", "\(sub.debugDescription)")
        }
        var event = Self.event
        event["sub"] = .string(String(repeating: "a", count: 255))
        #expect(try verify(body(events: .object(event))).sub.count == 255)
    }

    @Test("refused: not {payload}, events missing or not an object, no type or sub, wrong aud, wrong iss, bad signature")
    func refusals() throws {
        #expect(code(Array("{}".utf8)) == "apple_notification_invalid")
        #expect(code(Array(#"{"payload":5}"#.utf8)) == "apple_notification_invalid")
        #expect(code(Array("not json".utf8)) == "apple_notification_invalid")
        #expect(code(body(events: "not json")) == "apple_notification_invalid")
        #expect(code(body(events: .array([]))) == "apple_notification_invalid")
        #expect(code(body(events: .null, edit: { $0["events"] = nil })) == "apple_notification_invalid")
        var noSub = Self.event
        noSub["sub"] = nil
        #expect(code(body(events: .object(noSub))) == "apple_notification_invalid")
        var noType = Self.event
        noType["type"] = nil
        #expect(code(body(events: .object(noType))) == "apple_notification_invalid")
        #expect(code(body(events: .object(Self.event), aud: "com.example.other")) == "apple_token_claim_invalid")
        #expect(code(body(events: .object(Self.event), edit: { $0["iss"] = "https://evil.example" })) == "apple_token_claim_invalid")
        #expect(code(body(events: .object(Self.event), edit: { $0["exp"] = .number(TokenFixture.now.timeIntervalSince1970 - 3600) })) == "apple_token_expired")
        let claims: JSONObject = [
            "iss": "https://appleid.apple.com", "aud": .string(TokenFixture.clientID), "iat": .number(TokenFixture.now.timeIntervalSince1970),
            "events": .object(Self.event),
        ]
        let forged = f.standIn.sign(.object(claims), defect: .wrongKey)
        #expect(code(JSONValue.object(["payload": .string(forged)]).serializedBytes()) == "apple_token_signature_invalid")
    }

    @Test("a notification issued more than maxAge ago is refused, with or without exp: past the dedupe window a captured one replayed again")
    func maxAge() throws {
        let t = TokenFixture.now.timeIntervalSince1970
        let fresh = body(events: .object(Self.event), edit: { $0["iat"] = .number(t - AppleNotification.maxAge + 5) })
        #expect(code(fresh) == nil)
        let old = body(events: .object(Self.event), edit: { $0["iat"] = .number(t - AppleNotification.maxAge - 61) })
        #expect(code(old) == "apple_token_expired")
        let oldWithExp = body(
            events: .object(Self.event),
            edit: {
                $0["iat"] = .number(t - AppleNotification.maxAge - 61)
                $0["exp"] = .number(t + 3600)
            })
        #expect(code(oldWithExp) == "apple_token_expired")
    }
}
