internal import Foundation
internal import Hummingbird
internal import WebAuthnCore
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// Browser sessions.
///
/// The cookie holds a session secret: 16 random bytes and a 16-byte
/// HMAC-SHA-256 tag under the server secret, so a forged cookie is no
/// session (and cannot dodge the per-address throttle). The server keeps no
/// state for a session that has not signed in: the pending ceremony carries
/// its *binding*, SHA-256 of the secret, and the engine accepts the response
/// only with the same cookie. A sign-in stores a ``SignedInSession`` under
/// that hash in the shared ``SessionStore`` (SQLite or PostgreSQL), so any
/// instance behind a load balancer knows it; sign-in and sign-out always
/// change the secret (no fixation).
struct BrowserSessions: Sendable {
    let store: any SessionStore
    /// The server secret, keyed once: the key of every session tag.
    let key: HMACKey
    let secure: Bool
    let lifetime: TimeInterval
    /// When expired sessions were last swept from the store (at most once a minute, by the engine's clock).
    let lastSweep = SweepClock()
    static let sweepInterval: TimeInterval = 60

    /// The cookie's name (``ServerConfiguration/sessionCookieName``), `__Host-` first when secure:
    /// the browser then refuses it from a sub-domain or over plain HTTP.
    let cookieName: String

    init(store: any SessionStore, secret: [UInt8], secure: Bool, lifetime: TimeInterval, name: String = "webauthn_session") {
        self.store = store
        self.key = HMACKey(secret)
        self.secure = secure
        self.lifetime = lifetime
        self.cookieName = secure ? "__Host-" + name : name
        self.attributes = SetCookie.Attributes(maxAge: Int(lifetime), secure: secure, sameSite: .strict)
        self.expiredCookie = SetCookie(name: cookieName, value: "", SetCookie.Attributes(maxAge: 0, secure: secure, sameSite: .strict))
    }

    /// A session cookie's attributes: the session's lifetime, path `/`, `Secure` over HTTPS, `HttpOnly`, `SameSite=Strict`.
    private let attributes: SetCookie.Attributes
    /// A cookie that makes the browser forget the session.
    let expiredCookie: SetCookie

    /// A session secret held by a browser.
    struct Token: Sendable, Equatable {
        let bytes: [UInt8]
        /// SHA-256 of the token: what the store keeps and what ceremonies are bound to. Computed
        /// once (a sign-in's result read it three times).
        let binding: [UInt8]
        var cookieValue: String { Base64URL.encode(bytes) }

        init(bytes: [UInt8]) {
            self.bytes = bytes
            binding = Digest.sha256(bytes)
        }
    }

    func mint() -> Token {
        let nonce = SecureRandom.bytes(16)
        return Token(bytes: nonce + Array(key.authenticate(Array("webauthn session".utf8), nonce).prefix(16)))
    }

    /// The request's session token, if its cookie is one this server issued.
    func token(_ request: Request) -> Token? {
        // One spelling per token: the last of 43 characters carries 2 bits the token does not use,
        // and four cookies decoded to one token (red team, thirty-sixth pass; harmless, since the
        // budgets key on the token, but a session has one cookie).
        guard let value = HTTP.cookie(cookieName, in: request), value.utf8.count == 43,
            let bytes = Base64URL.decode(String(value)), bytes.count == 32, Base64URL.encode(bytes) == value
        else { return nil }
        let tag = Array(key.authenticate(Array("webauthn session".utf8), Array(bytes[0..<16])).prefix(16))
        // Constant time: every byte is compared whatever the first difference.
        guard Bytes.constantTimeEqual(tag, Array(bytes[16...])) else { return nil }
        return Token(bytes: bytes)
    }

    /// The signed-in session of a token, if it exists and has not expired by `now`.
    func signedIn(_ token: Token?, now: Date) async throws -> SignedInSession? {
        guard let token, let session = try await store.session(idHash: token.binding), session.expiresAt > now else { return nil }
        return session
    }

    /// Signs `userHandle` in: a new token (never the one that asked), stored
    /// as signed in; the old token's signed-in state, if any, ends, in the same write
    /// (``SessionStore/replace(_:with:)``). See ``session(for:token:now:verified:since:)``.
    func signIn(_ userHandle: [UInt8], replacing old: Token?, now: Date, verified: Bool, since: Date? = nil) async throws -> Token {
        let token = mint()
        try await store.replace(old?.binding, with: session(for: userHandle, token: token, now: now, verified: verified, since: since))
        await sweepIfDue(now: now)
        return token
    }

    /// Signs `userHandle` in as ``signIn(_:replacing:now:verified:since:)`` does, but only while
    /// `old` is still stored as that account's session (``SessionStore/replace(stored:with:)``):
    /// nil, and nothing stored, when it has ended. For a sign-in that rests on `old` (an Apple ID
    /// linked through it). Red team, thirteenth pass: the owner's sign-out everywhere answered
    /// that the intruder's session had ended, and the intruder was signed in to the account, with
    /// its Apple ID linked, in 2 to 25 rounds of 150; a first fix (store, then read `old`) still
    /// lost 9 to 12 of 150 on PostgreSQL, its insert not waiting for the account's lock, and
    /// failed a user's own link when the per-account cap dropped `old`.
    func signIn(_ userHandle: [UInt8], inPlaceOf old: Token, now: Date, verified: Bool) async throws -> Token? {
        let token = mint()
        guard try await store.replace(stored: old.binding, with: session(for: userHandle, token: token, now: now, verified: verified)) else { return nil }
        await sweepIfDue(now: now)
        return token
    }

    /// The signed-in session `token` stands for. Its `authenticatedAt` is `now` when the
    /// sign-in `verified` the user (user verification, or an identity provider), else
    /// `Date.distantPast`: only a verified sign-in or re-authentication counts for step-up
    /// (``recentlyVerified``). `since` keeps the original sign-in time across a re-authentication.
    func session(for userHandle: [UInt8], token: Token, now: Date, verified: Bool, since: Date? = nil) -> SignedInSession {
        SignedInSession(
            idHash: token.binding, userHandle: userHandle, createdAt: since ?? now, authenticatedAt: verified ? now : .distantPast,
            expiresAt: (since ?? now).addingTimeInterval(lifetime))
    }

    /// Sweeps expired sessions from the store, at most once a minute by the engine's clock,
    /// so it never grows with sign-ins.
    func sweepIfDue(now: Date) async {
        let due = lastSweep.time.withLock { last -> Bool in
            guard now.timeIntervalSince(last) >= Self.sweepInterval || now < last else { return false }
            last = now
            return true
        }
        if due { _ = try? await store.sweepSessions(expiredBefore: now) }
    }

    /// Ends the session of `token` on the server (and, in the SQL stores, the ceremonies pending under it).
    func signOut(_ token: Token?) async throws {
        if let token { try await store.delete(idHash: token.binding) }
    }

    func cookie(_ token: Token) -> SetCookie {
        SetCookie(name: cookieName, value: token.cookieValue, attributes)
    }
}

/// The time of the last session sweep, shared by copies of ``BrowserSessions``.
final class SweepClock: Sendable {
    let time = Locked<Date>(.distantPast)
}
