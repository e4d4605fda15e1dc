"""Which clouds skyless can reach with the credentials on this machine, and what to do about the others.

AWS is asked for real (STS GetCallerIdentity through boto3, the same credential chain the provider uses).
For GCP, Azure, Lambda Cloud and RunPod the credentials are looked for where their tools keep them, and
read enough to tell a usable file from a broken one; they are not sent anywhere. `local` always works.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from shared.config.env_names import (
    ENV_AWS_DEFAULT_REGION,
    ENV_AWS_ENDPOINT_URL,
    ENV_AWS_PROFILE,
    ENV_AWS_REGION,
    ENV_AZURE_CLIENT_CERTIFICATE_PATH,
    ENV_AZURE_CLIENT_ID,
    ENV_AZURE_CLIENT_SECRET,
    ENV_AZURE_CONFIG_DIR,
    ENV_AZURE_SUBSCRIPTION_ID,
    ENV_AZURE_TENANT_ID,
    ENV_CLOUDSDK_CONFIG,
    ENV_GOOGLE_APPLICATION_CREDENTIALS,
    ENV_GOOGLE_CLOUD_PROJECT,
    ENV_LAMBDA_API_KEY,
    ENV_RUNPOD_API_KEY,
    ENV_USER_HOME,
)
from shared.config.environment import process_environ

OK = "ok"  # verified with the cloud
FOUND = "found"  # present and well-formed, not verified
MISSING = "missing"
REFUSED = "refused"  # present, but the cloud (or the file) says no

CLOUDS = ("aws", "gcp", "azure", "lambda", "runpod", "local")


@dataclass(frozen=True)
class CloudCheck:
    cloud: str
    status: str
    detail: str
    fix: str = ""

    @property
    def usable(self) -> bool:
        return self.status in (OK, FOUND)

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "usable": self.usable}


def check_clouds(
    clouds: tuple[str, ...] = CLOUDS, env: Mapping[str, str] | None = None, home: Path | None = None
) -> list[CloudCheck]:
    env = process_environ(env)
    home = Path(env.get(ENV_USER_HOME) or Path.home()) if home is None else home
    checks: dict[str, Callable[[Mapping[str, str], Path], CloudCheck]] = {
        "aws": check_aws,
        "gcp": check_gcp,
        "azure": check_azure,
        "lambda": check_lambda,
        "runpod": check_runpod,
        "local": lambda _env, _home: CloudCheck("local", OK, "nodes run as processes on this machine"),
    }
    return [checks[cloud](env, home) for cloud in clouds]


# -- AWS ---------------------------------------------------------------------------------------

AWS_FIX = (
    "Run `aws configure` (or `aws sso login --profile NAME` and set AWS_PROFILE), or set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary keys)."
)


def check_aws(env: Mapping[str, str], home: Path) -> CloudCheck:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    region = env.get(ENV_AWS_REGION) or env.get(ENV_AWS_DEFAULT_REGION) or "us-east-1"
    endpoint = env.get(ENV_AWS_ENDPOINT_URL) or None
    config = Config(connect_timeout=3, read_timeout=5, retries={"max_attempts": 1})
    try:
        session = boto3.session.Session(profile_name=env.get(ENV_AWS_PROFILE) or None)
        sts = session.client("sts", region_name=region, endpoint_url=endpoint, config=config)
        identity = sts.get_caller_identity()
    except NoCredentialsError:
        return CloudCheck("aws", MISSING, "no AWS credentials found", AWS_FIX)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        return CloudCheck("aws", REFUSED, f"AWS refused the credentials: {code}", AWS_FIX)
    except BotoCoreError as error:  # an unknown profile, an unreachable endpoint, ...
        return CloudCheck("aws", REFUSED, f"cannot use the AWS credentials: {error}", AWS_FIX)
    where = f" (endpoint {endpoint})" if endpoint else ""
    return CloudCheck("aws", OK, f"account {identity['Account']} as {identity['Arn']}{where}")


# -- GCP ---------------------------------------------------------------------------------------

GCP_FIX = (
    "Run `gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service-account key file; set GOOGLE_CLOUD_PROJECT to the project to launch in."
)


def check_gcp(env: Mapping[str, str], home: Path) -> CloudCheck:
    named = env.get(ENV_GOOGLE_APPLICATION_CREDENTIALS)
    gcloud = env.get(ENV_CLOUDSDK_CONFIG)
    config_dir = Path(gcloud) if gcloud else home / ".config" / "gcloud"
    path = Path(named) if named else config_dir / "application_default_credentials.json"
    source = "GOOGLE_APPLICATION_CREDENTIALS" if named else "gcloud application-default credentials"
    if not path.is_file():
        if named:
            detail = f"GOOGLE_APPLICATION_CREDENTIALS names {path}, which does not exist"
        else:
            detail = f"no {source} ({path})"
        return CloudCheck("gcp", REFUSED if named else MISSING, detail, GCP_FIX)
    data = _json_file(path)
    kind = data.get("type") if data else None
    if kind not in ("service_account", "authorized_user", "external_account", "impersonated_service_account"):
        return CloudCheck("gcp", REFUSED, f"{path} is not a Google credentials file", GCP_FIX)
    assert data is not None
    project = env.get(ENV_GOOGLE_CLOUD_PROJECT) or data.get("project_id") or data.get("quota_project_id")
    if not project:
        return CloudCheck("gcp", FOUND, f"{kind} credentials in {path}, but no project", GCP_FIX)
    return CloudCheck("gcp", FOUND, f"{kind} credentials in {path}, project {project}")


# -- Azure -------------------------------------------------------------------------------------

AZURE_FIX = (
    "Run `az login` (and `az account set --subscription ID`), or set AZURE_CLIENT_ID, AZURE_TENANT_ID, "
    "AZURE_CLIENT_SECRET and AZURE_SUBSCRIPTION_ID for a service principal."
)
AZURE_PRINCIPAL = (
    ENV_AZURE_CLIENT_ID,
    ENV_AZURE_TENANT_ID,
    ENV_AZURE_CLIENT_SECRET,
    ENV_AZURE_SUBSCRIPTION_ID,
)


def check_azure(env: Mapping[str, str], home: Path) -> CloudCheck:
    given = [name for name in AZURE_PRINCIPAL if env.get(name)]
    if env.get(ENV_AZURE_CLIENT_CERTIFICATE_PATH) and ENV_AZURE_CLIENT_SECRET not in given:
        given.append(ENV_AZURE_CLIENT_SECRET)  # a certificate stands in for the secret
    if len(given) == len(AZURE_PRINCIPAL):
        return CloudCheck("azure", FOUND, f"service principal {env['AZURE_CLIENT_ID']} from the environment")
    config_dir = Path(env[ENV_AZURE_CONFIG_DIR]) if env.get(ENV_AZURE_CONFIG_DIR) else home / ".azure"
    profile = _json_file(config_dir / "azureProfile.json")
    subscriptions: list[dict[str, object]] = (profile or {}).get("subscriptions") or []  # type: ignore[assignment]
    default = next((s for s in subscriptions if s.get("isDefault")), None)
    if default:
        subscription = f"{default.get('id')} ({default.get('name')})"
        return CloudCheck("azure", FOUND, f"az CLI login, subscription {subscription}")
    if given:
        missing = ", ".join(name for name in AZURE_PRINCIPAL if name not in given)
        return CloudCheck("azure", REFUSED, f"service principal incomplete: {missing} not set", AZURE_FIX)
    detail = f"no AZURE_* service principal and no az CLI login ({config_dir})"
    return CloudCheck("azure", MISSING, detail, AZURE_FIX)


# -- Lambda Cloud and RunPod -------------------------------------------------------------------

LAMBDA_FIX = (
    "Create an API key at https://cloud.lambdalabs.com/api-keys and set LAMBDA_API_KEY, or write "
    "`api_key = <key>` to ~/.lambda_cloud/lambda_keys."
)
RUNPOD_FIX = (
    "Create an API key at https://www.runpod.io/console/user/settings and set RUNPOD_API_KEY, or run "
    "`runpod config` (it writes ~/.runpod/config.toml)."
)


def check_lambda(env: Mapping[str, str], home: Path) -> CloudCheck:
    if env.get(ENV_LAMBDA_API_KEY):
        return CloudCheck("lambda", FOUND, "API key from LAMBDA_API_KEY")
    path = home / ".lambda_cloud" / "lambda_keys"
    if not path.is_file():
        return CloudCheck("lambda", MISSING, f"no LAMBDA_API_KEY and no {path}", LAMBDA_FIX)
    for line in path.read_text(errors="replace").splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == "api_key" and value.strip():
            return CloudCheck("lambda", FOUND, f"API key from {path}")
    return CloudCheck("lambda", REFUSED, f"{path} has no `api_key = ...` line", LAMBDA_FIX)


def check_runpod(env: Mapping[str, str], home: Path) -> CloudCheck:
    if env.get(ENV_RUNPOD_API_KEY):
        return CloudCheck("runpod", FOUND, "API key from RUNPOD_API_KEY")
    path = home / ".runpod" / "config.toml"
    if not path.is_file():
        return CloudCheck("runpod", MISSING, f"no RUNPOD_API_KEY and no {path}", RUNPOD_FIX)
    try:
        config = tomllib.loads(path.read_text(errors="replace"))
    except tomllib.TOMLDecodeError as error:
        return CloudCheck("runpod", REFUSED, f"{path} is not valid TOML: {error}", RUNPOD_FIX)
    profile = config.get("default", config)
    if isinstance(profile, dict) and profile.get("api_key"):
        return CloudCheck("runpod", FOUND, f"API key from {path}")
    return CloudCheck("runpod", REFUSED, f"{path} has no api_key", RUNPOD_FIX)


def _json_file(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
