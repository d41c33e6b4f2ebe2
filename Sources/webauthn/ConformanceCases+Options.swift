import Foundation
@_spi(Testing) import WebAuthnCore
import WebAuthnTesting

extension CaseList {
    /// Server-ServerPublicKeyCredentialCreationOptions-Req-1 and API-CreationOptions.
    func creationOptionsCases() {
        let r = self.r, creation = Self.creation

        add("\(creation) P-1", "options carry status ok, an empty errorMessage, user (name, displayName, base64url id ≤ 64 bytes), rp (name, id), a base64url challenge of ≥ 16 bytes, pubKeyCredParams with ES256/EdDSA/RS256, a timeout > 0, and the extensions asked for") {
            let o = try await r.client().post("/attestation/options", ["username": .string(r.uniqueName("req1")), "displayName": "Req One",
                                                                       "attestation": "none", "extensions": ["example.extension": true]])
            try check(o.ok && o["errorMessage"]?.stringValue == "", "status/errorMessage: \(o.message)")
            try check(o["rp"]?["id"]?.stringValue == r.rpId && o["rp"]?["name"]?.stringValue != nil, "rp: \(o["rp"]?.serialized() ?? "missing")")
            try check(o["user"]?["name"]?.stringValue != nil && o["user"]?["displayName"]?.stringValue == "Req One", "user.name/displayName")
            let userId = o["user"]?["id"]?.stringValue.flatMap(Base64URL.decode) ?? []
            try check(!userId.isEmpty && userId.count <= 64, "user.id is not base64url of 1 to 64 bytes")
            try check((o["challenge"]?.stringValue.flatMap(Base64URL.decode)?.count ?? 0) >= 16, "challenge is not base64url of ≥16 bytes")
            let params = o["pubKeyCredParams"]?.arrayValue ?? []
            try check(params.allSatisfy { $0["type"]?.stringValue == "public-key" && $0["alg"]?.intValue != nil }, "pubKeyCredParams members")
            try check(Set(params.compactMap { $0["alg"]?.intValue }).isSuperset(of: [-7, -8, -257]), "pubKeyCredParams lacks ES256/EdDSA/RS256")
            try check((o["timeout"]?.intValue ?? 0) > 0, "timeout")
            try check(o["extensions"]?["example.extension"] != nil, "extensions not echoed")
        }
        add("\(creation) P-2", "attestation \"none\" asked for is echoed") {
            let o = try await r.client().post("/attestation/options", ["username": .string(r.uniqueName("req2")), "attestation": "none"])
            try check(o.ok && o["attestation"]?.stringValue == "none", "attestation: \(o["attestation"]?.serialized() ?? "missing")")
        }
        add("\(creation) P-3", "two options carry different challenges") {
            let c = r.client(), name = r.uniqueName("req3")
            let a = try await c.post("/attestation/options", ["username": .string(name)])
            let b = try await c.post("/attestation/options", ["username": .string(name)])
            try check(a.ok && b.ok && a["challenge"] != b["challenge"], "the challenges repeat")
        }
        add("API-CreationOptions P-1", "authenticatorSelection, attestation and extensions are echoed") {
            let o = try await r.client().post("/attestation/options", [
                "username": .string(r.uniqueName("echo")), "attestation": "direct", "extensions": ["credProps": true],
                "authenticatorSelection": ["requireResidentKey": true, "authenticatorAttachment": "platform", "userVerification": "required"],
            ])
            try check(o.ok && o["attestation"]?.stringValue == "direct", "attestation not echoed")
            try check(o["authenticatorSelection"]?["authenticatorAttachment"]?.stringValue == "platform", "authenticatorAttachment not echoed")
            try check(o["authenticatorSelection"]?["requireResidentKey"]?.boolValue == true, "requireResidentKey not echoed")
            try check(o["authenticatorSelection"]?["userVerification"]?.stringValue == "required", "userVerification not echoed")
            try check(o["extensions"]?["credProps"]?.boolValue == true, "extensions not echoed")
        }
        add("API-CreationOptions F-1", "options without a username fail") {
            let o = try await r.client().post("/attestation/options", ["displayName": "x"])
            try check(o.failedProperly, "expected a failure: \(o.status) \(o.message)")
        }

    }

    /// Server-ServerPublicKeyCredentialGetOptionsResponse-Req-1 and API-GetOptions.
    func getOptionsCases() {
        let r = self.r, get = Self.get

        add("\(get) P-1", "request options carry status ok, a base64url challenge of ≥ 16 bytes, rpId, the extensions asked for, the user's credential in allowCredentials, and the requested userVerification") {
            let c = r.client(), name = r.uniqueName("get1")
            let (reply, parts) = try await r.register(c, username: name, authenticator: r.securityKey())
            try check(reply.ok, reply.message)
            let o = try await c.post("/assertion/options", ["username": .string(name), "userVerification": "discouraged", "extensions": ["example.extension": "test"]])
            try check(o.ok && o["errorMessage"]?.stringValue == "", o.message)
            try check((o["challenge"]?.stringValue.flatMap(Base64URL.decode)?.count ?? 0) >= 16, "challenge")
            try check(o["rpId"]?.stringValue == r.rpId, "rpId")
            try check(o["extensions"]?["example.extension"]?.stringValue == "test", "extensions not echoed")
            let allowed = o["allowCredentials"]?.arrayValue ?? []
            try check(allowed.count == 1 && allowed[0]["type"]?.stringValue == "public-key" && allowed[0]["id"]?.stringValue == Base64URL.encode(parts.id), "allowCredentials: \(allowed)")
            try check(o["userVerification"]?.stringValue == "discouraged", "userVerification not echoed")
        }
        add("\(get) P-2", "two request options carry different challenges") {
            let a = try await r.client().post("/assertion/options", [:])
            let b = try await r.client().post("/assertion/options", [:])
            try check(a.ok && b.ok && a["challenge"] != b["challenge"], "the challenges repeat")
        }
        add("API-GetOptions P-1", "request options without a username start a discoverable login (no allowCredentials)") {
            let o = try await r.client().post("/assertion/options", [:])
            try check(o.ok && (o["allowCredentials"]?.arrayValue ?? []).isEmpty, o.message)
        }
        add("API-GetOptions F-1", "request options for an unknown username fail") {
            let o = try await r.client().post("/assertion/options", ["username": .string(r.uniqueName("nobody"))])
            try check(o.failedProperly, "expected a failure: \(o.status) \(o.message)")
        }

    }
}
