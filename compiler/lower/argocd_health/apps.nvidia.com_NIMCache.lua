-- Argo CD health of a NIM Operator NIMCache (apps.nvidia.com), written by gpuc.
-- gpuc applies the NIMService in the sync wave after its cache, so the service starts only once the model
-- is downloaded: Ready is Healthy, Failed is Degraded, every other state is the download in progress.
local hs = {status = "Progressing", message = "waiting for the NIM Operator to start caching"}
local status = obj.status
if status == nil or status.state == nil then
  return hs
end
-- NIM_CACHE_RECONCILE_FAILED is True when a reconcile failed: the operator retries it (controller-runtime
-- requeues), and it is often transient: v3.1.2 reads its probe Pod back from an informer right after creating
-- it (nimcache_controller.go) and reports "Pod ... not found" until the cache Job exists, minutes on a real
-- cluster (tests/real/test_real_nim_operator.py saw it in most runs). So it is Progressing with its message;
-- only the Failed state, which the operator does not leave by itself, is Degraded.
local function failure(any_message)
  for _, c in ipairs(status.conditions or {}) do
    if c.type == "NIM_CACHE_RECONCILE_FAILED" and c.status == "True" then
      return c.message or c.reason or c.type
    end
  end
  if any_message then
    for _, c in ipairs(status.conditions or {}) do
      if c.status ~= "True" and c.message ~= nil and c.message ~= "" then
        return c.message
      end
    end
  end
  return nil
end
if status.state == "Ready" then
  hs.status = "Healthy"
  hs.message = "model cached"
  if status.pvc ~= nil then hs.message = hs.message .. " in PVC " .. status.pvc end
elseif status.state == "Failed" then
  hs.status = "Degraded"
  hs.message = "caching failed: " .. (failure(true) or "see the logs of the NIMCache's job")
else
  local failed = failure(false)
  if failed ~= nil then
    hs.message = "caching: " .. status.state .. ", the NIM Operator retries: " .. failed
  else
    hs.message = "caching: " .. status.state
  end
end
return hs
