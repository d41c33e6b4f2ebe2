import Foundation
import Synchronization
import WebAuthnCore

/// Browser sessions, bound by an HttpOnly, SameSite cookie: the challenge of
/// the ceremony in progress and who is signed in. In memory, per process: a
/// response that reaches another instance is matched by its challenge, which
/// the shared store holds.
final class SessionStore: Sendable {
    struct Session: Sendable {
        var pendingChallenge: [UInt8]?
        var signedIn: [UInt8]?
        var expiresAt: Date
    }

    static let cookieName = "webauthn_session"
    static let lifetime: TimeInterval = 12 * 3600
    private let sessions = Mutex<[String: Session]>([:])
    /// The most sessions kept: beyond it expired ones are swept, then the
    /// oldest dropped, so a flood of new clients cannot grow memory without bound.
    let capacity: Int

    init(capacity: Int = 100_000) { self.capacity = capacity }

    var count: Int { sessions.withLock { $0.count } }

    /// The session for a cookie value, if it exists and has not expired.
    func session(_ id: String?) -> Session? {
        guard let id else { return nil }
        return sessions.withLock { all in
            guard let s = all[id], s.expiresAt > Date() else { return nil }
            return s
        }
    }

    /// Updates (or creates) a session; returns its id.
    func update(_ id: String?, _ change: (inout Session) -> Void) -> String {
        sessions.withLock { all in
            let key = id.flatMap { all[$0] != nil ? $0 : nil } ?? Base64URL.encode(SecureRandom.bytes(24))
            var s = all[key] ?? Session(expiresAt: Date().addingTimeInterval(Self.lifetime))
            change(&s)
            if all[key] == nil && all.count >= capacity {
                let now = Date()
                all = all.filter { $0.value.expiresAt > now }
                while all.count >= capacity, let oldest = all.min(by: { $0.value.expiresAt < $1.value.expiresAt }) {
                    all.removeValue(forKey: oldest.key)
                }
            }
            all[key] = s
            return key
        }
    }

    /// Takes the pending challenge out of a session (it is used once).
    func takeChallenge(_ id: String?) -> [UInt8]? {
        guard let id else { return nil }
        return sessions.withLock { all in
            let challenge = all[id]?.pendingChallenge
            all[id]?.pendingChallenge = nil
            return challenge
        }
    }

    func end(_ id: String?) {
        guard let id else { return }
        _ = sessions.withLock { $0.removeValue(forKey: id) }
    }
}
