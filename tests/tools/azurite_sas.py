#!/usr/bin/env python3
"""azurite_sas.py KEY_BASE64 -- print an account SAS (blob service, all
resource types, rwdlac, valid one hour, sv=2018-11-09) for Azurite's
development account, signed with KEY_BASE64. For the SAS store test."""
import base64, hashlib, hmac, sys, time, urllib.parse
key = base64.b64decode(sys.argv[1]); acct = "devstoreaccount1"
exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
f = dict(sv="2018-11-09", ss="b", srt="sco", sp="rwdlac", se=exp, spr="https,http")
sts = "\n".join([acct, f["sp"], f["ss"], f["srt"], "", f["se"], "", f["spr"], f["sv"], ""])
f["sig"] = base64.b64encode(hmac.new(key, sts.encode(), hashlib.sha256).digest()).decode()
print(urllib.parse.urlencode(f))
