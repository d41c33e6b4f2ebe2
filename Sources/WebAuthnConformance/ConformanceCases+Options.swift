internal import Foundation
internal import WebAuthnCore
internal import WebAuthnTesting
internal import WebAuthnMetadata
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

extension CaseList {
    /// Server-ServerPublicKeyCredentialCreationOptions-Req-1 and API-CreationOptions.
    func creationOptionsCases() {
        let r = self.r, creation = Self.creation

        add(
            "\(creation) P-1",
            "options carry status ok, an empty errorMessage, user (the name and displayName asked for, a base64url id of 1 to 64 bytes), rp (name; id if present), a base64url challenge of ≥ 16 bytes, pubKeyCredParams (public-key members with a numeric alg, one the authenticator makes), a timeout > 0 if present, and the attestation, authenticatorSelection and extensions asked for"
        ) {
            let name = r.uniqueName("req1")
            let selection: JSONValue = ["requireResidentKey": false, "userVerification": "preferred"]
            let o = try await r.client().post(
                "/attestation/options",
                [
                    "username": .string(name), "displayName": "Req One", "attestation": "direct",
                    "authenticatorSelection": selection, "extensions": ["example.extension": true],
                ])
            try check(o.ok && o["errorMessage"]?.stringValue == "", "status/errorMessage: \(o.message)")
            try check(o["rp"]?["name"]?.stringValue.map { !$0.isEmpty } == true, "rp.name: \(o["rp"]?.serialized() ?? "missing")")
            try check(o["rp"]?["id"].map { $0.stringValue == r.rpId } ?? true, "rp.id: \(o["rp"]?.serialized() ?? "missing")")
            try check(o["user"]?["name"]?.stringValue == name && o["user"]?["displayName"]?.stringValue == "Req One", "user.name/displayName")
            let userId = o["user"]?["id"]?.stringValue.flatMap(Base64URL.decode) ?? []
            try check(!userId.isEmpty && userId.count <= 64, "user.id is not base64url of 1 to 64 bytes")
            try check((o["challenge"]?.stringValue.flatMap(Base64URL.decode)?.count ?? 0) >= 16, "challenge is not base64url of ≥16 bytes")
            let params = o["pubKeyCredParams"]?.arrayValue ?? []
            try check(params.allSatisfy { $0["type"]?.stringValue != nil && $0["alg"]?.intValue != nil }, "pubKeyCredParams members")
            try check(
                params.contains { $0["type"]?.stringValue == "public-key" && (try? SigningKey.generate(COSEAlgorithm($0["alg"]?.intValue ?? 0))) != nil },
                "pubKeyCredParams has no public-key algorithm the authenticator makes")
            try check(o["timeout"].map { ($0.intValue ?? 0) > 0 } ?? true, "timeout")
            try check(o["attestation"]?.stringValue == "direct", "attestation not echoed")
            try check(o["authenticatorSelection"] == selection, "authenticatorSelection: \(o["authenticatorSelection"]?.serialized() ?? "missing")")
            try check(o["extensions"] == ["example.extension": true], "extensions: \(o["extensions"]?.serialized() ?? "missing")")
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
            let o = try await r.client().post(
                "/attestation/options",
                [
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

        add(
            "\(get) P-1",
            "request options carry status ok, an empty errorMessage, a base64url challenge of ≥ 16 bytes, rpId if present, a timeout > 0 if present, the extensions asked for, the user's credential in allowCredentials, and the requested userVerification"
        ) {
            let c = r.client(), name = r.uniqueName("get1")
            let (reply, parts) = try await r.register(c, username: name, authenticator: r.securityKey())
            try check(reply.ok, reply.message)
            let o = try await c.post(
                "/assertion/options", ["username": .string(name), "userVerification": "required", "extensions": ["example.extension": true]])
            try check(o.ok && o["errorMessage"]?.stringValue == "", o.message)
            try check((o["challenge"]?.stringValue.flatMap(Base64URL.decode)?.count ?? 0) >= 16, "challenge")
            try check(o["rpId"].map { $0.stringValue == r.rpId } ?? true, "rpId")
            try check(o["timeout"].map { ($0.intValue ?? 0) > 0 } ?? true, "timeout")
            try check(o["extensions"]?["example.extension"] == true, "extensions not echoed")
            let allowed = o["allowCredentials"]?.arrayValue ?? []
            try check(
                allowed.count == 1 && allowed[0]["type"]?.stringValue == "public-key" && allowed[0]["id"]?.stringValue == Base64URL.encode(parts.id),
                "allowCredentials: \(allowed)")
            try check(o["userVerification"]?.stringValue == "required", "userVerification not echoed")
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
        add(
            "API-GetOptions F-1",
            "request options for an unknown username fail (or, on an enumeration-resistant server, list stand-ins that no assertion can answer)"
        ) {
            let o = try await r.client().post("/assertion/options", ["username": .string(r.uniqueName("nobody"))])
            // WebAuthn L3 §14.6.3: a server may answer an unknown name like a real account, with stand-in credentials.
            let standIns = o.ok && !(o["allowCredentials"]?.arrayValue ?? []).isEmpty
            try check(o.failedProperly || standIns, "expected a failure or stand-in credentials: \(o.status) \(o.message)")
        }

    }
}
