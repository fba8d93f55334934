#!/usr/bin/python3
"""Calls one method of Ganeti's own RAPI client against corral-rapi.

Usage: filters.py METHOD ARGS_JSON [KWARGS_JSON]; connection settings come
from the environment (RAPI_HOST, RAPI_PORT, RAPI_CA, RAPI_USER,
RAPI_PASSWORD). Prints {"result": ...} or {"error": {"code", "message"}}.
"""

import json
import os
import sys

from ganeti.rapi import client


def main():
    cfg = client.GenericCurlConfig(cafile=os.environ["RAPI_CA"], verify_hostname=True)
    c = client.GanetiRapiClient(os.environ["RAPI_HOST"], port=int(os.environ["RAPI_PORT"]),
                                username=os.environ["RAPI_USER"], password=os.environ["RAPI_PASSWORD"],
                                curl_config_fn=cfg)
    method = sys.argv[1]
    args = json.loads(sys.argv[2]) if len(sys.argv) > 2 else []
    kwargs = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    try:
        result = getattr(c, method)(*args, **kwargs)
    except client.GanetiApiError as err:
        print(json.dumps({"error": {"code": err.code, "message": str(err)}}))
        return
    print(json.dumps({"result": result}))


if __name__ == "__main__":
    main()
