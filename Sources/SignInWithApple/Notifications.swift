public import Foundation
public import WebAuthnCore
package import _WebAuthnEncoding
package import _WebAuthnCrypto

/// A verified server-to-server notification (Apple POSTs `{"payload": "<JWS>"}`).
public struct AppleNotification: Sendable, Equatable {
    /// What happened.
    public enum Event: Sendable, Equatable {
        /// `email-disabled`: the user stopped forwarding from the private relay address.
        case emailDisabled
        /// `email-enabled`: forwarding from the private relay address is back on.
        case emailEnabled
        /// `consent-revoked`: the user stopped using Sign in with Apple with the app.
        case consentRevoked
        /// `account-delete` or `account-deleted` (Apple has sent both): the Apple account is gone.
        case accountDeleted
        /// Any other type, kept as sent.
        case other(String)

        init(_ type: String) {
            switch type {
            case "email-disabled": self = .emailDisabled
            case "email-enabled": self = .emailEnabled
            case "consent-revoked": self = .consentRevoked
            case "account-delete", "account-deleted": self = .accountDeleted
            default: self = .other(type)
            }
        }
    }

    /// The event.
    public let event: Event
    /// The event's `type` as sent.
    public let type: String
    /// The user (`events.sub`).
    public let sub: String
    /// The client id the notification is for (`aud`).
    public let audience: String
    /// `events.email`, for the email events.
    public let email: String?
    /// `events.is_private_email`, as a boolean or a string.
    public let isPrivateEmail: Bool?
    /// `events.event_time`: Apple sends milliseconds (values over 10^11) or seconds; both are read.
    public let eventTime: Date?
    /// `iat` of the notification.
    public let issuedAt: Date
    /// A key to drop duplicates by: `jti` when present, else SHA-256 of the payload JWS (lowercase hex).
    public let dedupeKey: String
}

extension AppleNotification {
    /// The largest notification body accepted, in bytes.
    public static let maxBodySize = 20 * 1024

    /// How long after its `iat` a notification is accepted (24 hours, plus the leeway), whether or
    /// not it has an `exp`: Apple's notifications often have none, and one captured in transit
    /// could otherwise be replayed for ever. Keep each notification's dedupe key at least this long
    /// plus the leeway (``dedupeLifetime(leeway:)``): a replay is then either a duplicate or refused.
    public static let maxAge: TimeInterval = 24 * 3600

    /// How long to keep a notification's ``dedupeKey`` so that no replay outlives it: ``maxAge``
    /// plus twice the leeway.
    public static func dedupeLifetime(leeway: TimeInterval) -> TimeInterval { maxAge + 2 * leeway }

    /// Reads the body Apple POSTs and returns the payload JWS. Throws `apple_notification_invalid`.
    public static func payload(fromBody body: [UInt8]) throws(WebAuthnError) -> String {
        guard body.count <= maxBodySize else {
            throw WebAuthnError(.appleNotificationInvalid, "the notification body is \(body.count) bytes; the limit is \(maxBodySize)")
        }
        let json: JSONValue
        do {
            json = try JSONValue.parse(body, limits: JSONLimits(maxBytes: maxBodySize, maxDepth: 4))
        } catch {
            throw WebAuthnError(.appleNotificationInvalid, "the notification body is not JSON: \(error.message)")
        }
        guard let payload = json["payload"]?.stringValue, !payload.isEmpty else {
            throw WebAuthnError(.appleNotificationInvalid, "the notification body has no \"payload\" string")
        }
        return payload
    }

    /// Verifies a notification body against a key set at `now`: the payload JWS as an
    /// identity token (RS256, `kid`, `iss`, `aud` among the client ids, `iat` not older than
    /// ``maxAge``, `exp` when present, with the leeway), then its `events`.
    public static func verify(
        body: [UInt8], keys: AppleKeySet, clientIDs: [String], now: Date,
        leeway: TimeInterval = 60
    ) throws(WebAuthnError) -> AppleNotification {
        let signed = try SignedToken(Array(try payload(fromBody: body).utf8))
        return try verified(signed, key: try keys.key(for: signed.kid), clientIDs: clientIDs, now: now, leeway: leeway)
    }

    package static func verified(
        _ signed: SignedToken, key: PublicKey, clientIDs: [String], now: Date,
        leeway: TimeInterval
    ) throws(WebAuthnError) -> AppleNotification {
        let claims = try signed.verified(with: key, clientIDs: clientIDs, now: now, leeway: leeway, requireExpiry: false)
        let age = now.timeIntervalSince(claims.issuedAt)
        guard age <= maxAge + leeway else {
            throw WebAuthnError(.appleTokenExpired, "the notification was issued \(Int(age)) s ago; the limit is \(Int(maxAge)) s (leeway \(Int(leeway)) s)")
        }
        let events = try Self.events(claims.object["events"])
        guard let type = events["type"]?.stringValue, !type.isEmpty, type.utf8.count <= 64 else {
            throw WebAuthnError(.appleNotificationInvalid, "the events have no type")
        }
        guard let sub = events["sub"]?.stringValue, AppleTokenVerifier.isIdentifier(sub) else {
            throw WebAuthnError(.appleNotificationInvalid, "the events have no sub of 1 to 255 visible ASCII characters")
        }
        let email = try AppleTokenVerifier.email(events["email"]) { WebAuthnError(.appleNotificationInvalid, "events.email is not an email address: \($0)") }
        let isPrivate: Bool?
        do {
            isPrivate = try AppleTokenVerifier.flag(events, "is_private_email")
        } catch {
            throw WebAuthnError(.appleNotificationInvalid, "events.is_private_email is neither a boolean nor \"true\"/\"false\"")
        }
        let dedupe: String
        if let jti = claims.object["jti"]?.stringValue, !jti.isEmpty, jti.utf8.count <= 255 {
            dedupe = jti
        } else {
            dedupe = Bytes.hex(Digest.sha256(signed.compact))
        }
        return AppleNotification(
            event: Event(type), type: type, sub: sub, audience: claims.audience, email: email,
            isPrivateEmail: isPrivate, eventTime: try eventTime(events["event_time"]),
            issuedAt: claims.issuedAt, dedupeKey: dedupe)
    }

    /// `events` is an object, or a string holding one (Apple sends the latter).
    static func events(_ value: JSONValue?) throws(WebAuthnError) -> JSONObject {
        switch value {
        case .object(let o)?: return o
        case .string(let text)?:
            guard let o = try? JSONValue.parse(Array(text.utf8), limits: JSONLimits(maxBytes: maxBodySize, maxDepth: 4)).objectValue else {
                throw WebAuthnError(.appleNotificationInvalid, "the events string is not a JSON object")
            }
            return o
        default:
            throw WebAuthnError(.appleNotificationInvalid, "events is neither an object nor a JSON-encoded object")
        }
    }

    /// Milliseconds when over 10^11 (year 5138 in seconds), else seconds.
    static func eventTime(_ value: JSONValue?) throws(WebAuthnError) -> Date? {
        guard let value else { return nil }
        guard let n = value.numberValue, n.isFinite, n >= 0, n < 1e15 else {
            throw WebAuthnError(.appleNotificationInvalid, "events.event_time is not a time")
        }
        return Date(timeIntervalSince1970: n > 1e11 ? n / 1000 : n)
    }
}
