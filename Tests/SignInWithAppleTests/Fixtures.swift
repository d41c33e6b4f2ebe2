import Foundation
import Synchronization
import SignInWithApple
import WebAuthnCore
import WebAuthnTesting
import _WebAuthnEncoding
import _WebAuthnCrypto

/// A stand-in (not serving) and its key set, at a fixed time.
struct TokenFixture {
    static let clientID = "com.example.app"
    static let servicesID = "com.example.web"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    let standIn: AppleStandIn
    let user = AppleStandIn.User(sub: "001234.abcdef0123456789.0042", email: "x@privaterelay.appleid.com", isPrivateEmail: true)

    init() throws {
        standIn = try AppleStandIn(
            credentials: try AppleStandIn.makeCredentials(), clientIDs: [Self.clientID, Self.servicesID],
            clock: .fixed(Self.now))
    }

    var keys: AppleKeySet { get throws { try AppleKeySet(json: Array(standIn.keySetJSON.utf8)) } }

    /// Claims for `user` at `now`, edited.
    func claims(_ edit: (inout JSONObject) -> Void = { _ in }) -> JSONObject {
        var c = standIn.claims(for: user, audience: Self.clientID, nonce: "n-0123456789", issuedAt: Self.now)
        edit(&c)
        return c
    }

    func token(_ edit: (inout JSONObject) -> Void = { _ in }) -> String {
        standIn.sign(.object(claims(edit)))
    }

    func verify(_ token: String, nonce: String? = "n-0123456789", at now: Date = Self.now, keys: AppleKeySet? = nil) throws(WebAuthnError) -> AppleIdentityToken
    {
        let set: AppleKeySet
        if let keys {
            set = keys
        } else {
            do { set = try self.keys } catch { throw error as! WebAuthnError }
        }
        return try AppleTokenVerifier.verifyIdentityToken(token, keys: set, clientIDs: [Self.clientID, Self.servicesID], nonce: nonce, now: now)
    }

    /// The code a failed verification throws, or nil.
    func code(_ token: String, nonce: String? = "n-0123456789", at now: Date = Self.now, keys: AppleKeySet? = nil) -> String? {
        do {
            _ = try verify(token, nonce: nonce, at: now, keys: keys)
            return nil
        } catch {
            return error.code.rawValue
        }
    }

    /// The stand-in's key set with the entry of the current kid edited.
    func keys(editing edit: (inout JSONObject) -> Void) throws -> AppleKeySet {
        var set = standIn.keySet().objectValue!
        var entries = set["keys"]!.arrayValue!
        var first = entries[0].objectValue!
        edit(&first)
        entries[0] = .object(first)
        set["keys"] = .array(entries)
        return try AppleKeySet(json: JSONValue.object(set).serializedBytes())
    }
}

/// A clock tests move by hand.
final class ManualClock: Sendable {
    private let time: Mutex<Date>
    init(_ start: Date = TokenFixture.now) { time = Mutex(start) }
    func advance(_ seconds: TimeInterval) { time.withLock { $0 = $0.addingTimeInterval(seconds) } }
    var clock: WebAuthnClock { WebAuthnClock { [self] in time.withLock { $0 } } }
}
